"""Writing usage events as Parquet, off the event loop, with bounded memory.

The gateway hands each event to :meth:`UsageWriter.add` as a row tuple in the columns' order
(:data:`quotagate.usage.schema.USAGE_COLUMNS`), which never blocks: the rows go to a
background thread a batch at a time (:class:`quotagate.usage.handover.BatchHandOver`), so
the event loop pays a tuple and a list append per event. When the writer thread falls so far
behind that ``queue_size`` events wait for it, new events are dropped, counted and (at most
once every few seconds) logged, because a slow disk must never slow the data path. A batch
that is not full is handed over by :meth:`UsageWriter.flush`, which the gateway calls every
housekeeping tick (once a second). The thread groups rows into one open file per
``date=YYYY-MM-DD/hour=HH`` partition and rolls files by age and by size. Files are written
under a hidden ``.name`` and renamed when complete, so readers only ever see whole Parquet
files.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from quotagate.usage.handover import BatchHandOver
from quotagate.usage.schema import USAGE_SCHEMA, UsageEvent

log = logging.getLogger(__name__)

_DROP_LOG_INTERVAL_S: Final = 5.0
_HOUR_MS: Final = 3_600_000

UsageRow = tuple[Any, ...]
"""One usage event: its values in :data:`quotagate.usage.schema.USAGE_COLUMNS` order."""


@dataclass(frozen=True, slots=True)
class UsageWriterSettings:
    directory: Path
    gateway_id: str
    roll_interval_s: float = 300.0
    """Close a file this long after it was opened."""
    roll_bytes: int = 128 * 1024 * 1024
    """Close a file once this many (uncompressed, in-memory) bytes went into it."""
    row_group_rows: int = 50_000
    """Rows buffered before a row group is written."""
    flush_interval_s: float = 1.0
    """Buffered rows are written at least this often."""
    queue_size: int = 200_000
    """Events held in memory waiting for the writer thread; beyond that they are dropped."""


class _OpenFile:
    __slots__ = ("bytes", "final_path", "opened", "rows", "tmp_path", "writer")

    def __init__(self, directory: Path, name: str, opened: float) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.final_path = directory / name
        self.tmp_path = directory / f".{name}.inprogress"
        self.writer = pq.ParquetWriter(str(self.tmp_path), USAGE_SCHEMA, compression="zstd")
        self.opened = opened
        self.rows = 0
        self.bytes = 0

    def close(self) -> None:
        self.writer.close()
        os.replace(self.tmp_path, self.final_path)


class UsageWriter:
    """Thread-backed Parquet writer: ``add``/``submit``/``flush`` from one thread (the event
    loop), ``close`` once, from any thread, after the last ``add``."""

    def __init__(self, settings: UsageWriterSettings) -> None:
        self.settings = settings
        self._rows: BatchHandOver[UsageRow] = BatchHandOver(settings.queue_size)
        self._buffers: dict[int, list[UsageRow]] = {}  # by hour since the epoch
        self._files: dict[int, _OpenFile] = {}
        self._sequence = 0
        self.dropped = 0
        self.written = 0
        self.files_completed = 0
        self._last_drop_log = 0.0
        _load_conversions()
        self._writer = threading.Thread(target=self._run, name="quotagate-usage", daemon=True)
        self._writer.start()

    # -- producer side (event loop) --------------------------------------------------------

    def add(self, row: UsageRow) -> bool:
        """Take one event; False (and counted) if the writer is that far behind or closed."""
        if self._rows.add(row):
            return True
        if self._rows.closed:
            self.dropped += 1
        else:
            self._drop()
        return False

    def submit(self, event: UsageEvent) -> bool:
        """:meth:`add` for an event built as a :class:`UsageEvent`."""
        return self.add(astuple(event))

    def flush(self) -> None:
        """Hand the rows taken so far to the writer thread (they reach disk within its
        ``flush_interval_s``); a no-op while the thread is behind."""
        self._rows.flush()

    def _drop(self) -> None:
        self.dropped += 1
        now = time.monotonic()
        if now - self._last_drop_log >= _DROP_LOG_INTERVAL_S:
            self._last_drop_log = now
            log.warning(
                "usage_events_dropped total=%d queue_size=%d reason=writer_behind",
                self.dropped,
                self.settings.queue_size,
            )

    @property
    def pending(self) -> int:
        """Events taken and not yet with the writer thread's files (approximately)."""
        return self._rows.pending

    def close(self, timeout_s: float = 60.0) -> None:
        """Write everything taken, close all files and stop the thread."""
        if self._rows.close():
            self._writer.join(timeout_s)

    # -- writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        settings = self.settings
        last_flush = time.monotonic()
        while (rows := self._rows.take(settings.flush_interval_s)) is not None:
            if rows:
                self._buffer(rows)
                # Drain what else is there without waking up per batch.
                while more := self._rows.take(0):
                    self._buffer(more)
                if more is None:
                    break
            now = time.monotonic()
            if now - last_flush >= settings.flush_interval_s:
                last_flush = now
                self._safely(self._flush_all)
            self._safely(self._roll_aged)
        self._finish()

    def _finish(self) -> None:
        self._safely(self._flush_all)
        for key in list(self._files):
            self._safely(functools.partial(self._close_file, key))

    def _safely(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception:  # the data path must survive a full disk
            log.exception("usage_write_failed")

    def _buffer(self, rows: list[UsageRow]) -> None:
        buffers = self._buffers
        row_group_rows = self.settings.row_group_rows
        for row in rows:
            hour = row[0] // _HOUR_MS  # ts_ms
            hour_rows = buffers.get(hour)
            if hour_rows is None:
                hour_rows = buffers[hour] = []
            hour_rows.append(row)
            if len(hour_rows) >= row_group_rows:
                self._safely(functools.partial(self._flush, hour))

    def _flush_all(self) -> None:
        for key in list(self._buffers):
            self._flush(key)

    def _flush(self, key: int) -> None:
        rows = self._buffers.pop(key, None)
        if not rows:
            return
        table = _to_table(rows)
        handle = self._files.get(key)
        if handle is None:
            self._sequence += 1
            stamp = datetime.fromtimestamp(key * _HOUR_MS / 1000, UTC)
            directory = (
                self.settings.directory
                / f"date={stamp.strftime('%Y-%m-%d')}"
                / f"hour={stamp.strftime('%H')}"
            )
            name = (
                f"part-{self.settings.gateway_id}-{int(time.time() * 1000)}-"
                f"{os.getpid()}-{self._sequence:06d}.parquet"
            )
            handle = self._files[key] = _OpenFile(directory, name, time.monotonic())
        handle.writer.write_table(table)
        handle.rows += table.num_rows
        handle.bytes += table.nbytes
        self.written += table.num_rows
        if handle.bytes >= self.settings.roll_bytes:
            self._close_file(key)

    def _roll_aged(self) -> None:
        now = time.monotonic()
        for key, handle in list(self._files.items()):
            # An hour partition that gets no more events is closed too (its hour is over).
            if now - handle.opened >= self.settings.roll_interval_s or (
                key not in self._buffers and now - handle.opened >= 3600
            ):
                self._flush(key)
                self._close_file(key)

    def _close_file(self, key: int) -> None:
        handle = self._files.pop(key, None)
        if handle is not None:
            handle.close()
            self.files_completed += 1


def _load_conversions() -> None:
    # pyarrow imports pandas (when installed) the first time it converts a Python sequence,
    # to ask whether it is a pandas object: ~0.3 s of CPU holding the GIL. Paid on the writer
    # thread at the first flush, it stalled the event loop mid-traffic; paid here, it is
    # start-up work (and part of the heap a serving process freezes).
    pa.array((), pa.int64())


def _to_table(rows: list[UsageRow]) -> pa.Table:
    # Rows to columns in C, one column at a time straight from the rows (as fast as
    # transposing them all at once with zip(*rows), ~0.85 µs per row, without twenty
    # row-long tuples alive at once for the collector to walk). The topics column's
    # (topic, bytes) tuples are its structs.
    size = len(rows)
    return pa.table(
        [
            pa.array(map(itemgetter(index), rows), field.type, size=size)
            for index, field in enumerate(USAGE_SCHEMA)
        ],
        schema=USAGE_SCHEMA,
    )
