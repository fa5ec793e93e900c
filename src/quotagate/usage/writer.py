"""Writing usage events as Parquet, off the event loop, with bounded memory.

The gateway hands each event to :meth:`UsageWriter.submit`, which never blocks: events go
into a bounded queue, and when the queue is full the event is dropped, counted and (at most
once every few seconds) logged, because a slow disk must never slow the data path. A
background thread drains the queue into one open file per ``date=YYYY-MM-DD/hour=HH``
partition and rolls files by age and by size. Files are written under a hidden ``.name``
and renamed when complete, so readers only ever see whole Parquet files.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

from quotagate.usage.schema import USAGE_COLUMNS, USAGE_SCHEMA, UsageEvent

log = logging.getLogger(__name__)

_STOP: Final = object()
_DROP_LOG_INTERVAL_S: Final = 5.0
_TOPIC_FIELDS: Final = ("topic", "bytes")


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
    """Thread-backed Parquet writer; ``submit`` from any thread, ``close`` once."""

    def __init__(self, settings: UsageWriterSettings) -> None:
        self.settings = settings
        self._queue: queue.Queue[object] = queue.Queue(settings.queue_size)
        self._buffers: dict[tuple[str, str], list[UsageEvent]] = {}
        self._files: dict[tuple[str, str], _OpenFile] = {}
        self._sequence = 0
        self.dropped = 0
        self.written = 0
        self.files_completed = 0
        self._last_drop_log = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="quotagate-usage", daemon=True)
        self._thread.start()

    # -- producer side (event loop) --------------------------------------------------------

    def submit(self, event: UsageEvent) -> bool:
        """Queue ``event``; False (and counted) if the queue is full or the writer closed."""
        if self._closed:
            self.dropped += 1
            return False
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            now = time.monotonic()
            if now - self._last_drop_log >= _DROP_LOG_INTERVAL_S:
                self._last_drop_log = now
                log.warning(
                    "usage_events_dropped total=%d queue_size=%d reason=writer_behind",
                    self.dropped,
                    self.settings.queue_size,
                )
            return False
        return True

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    def close(self, timeout_s: float = 60.0) -> None:
        """Write everything queued, close all files and stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout_s)

    # -- writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        settings = self.settings
        last_flush = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=settings.flush_interval_s)
            except queue.Empty:
                item = None
            if item is _STOP:
                break
            if isinstance(item, UsageEvent):
                self._buffer(item)
                # Drain what else is there without waking up per event.
                while True:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is _STOP:
                        self._finish()
                        return
                    if isinstance(more, UsageEvent):
                        self._buffer(more)
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

    def _buffer(self, event: UsageEvent) -> None:
        stamp = datetime.fromtimestamp(event.ts_ms / 1000, UTC)
        key = (stamp.strftime("%Y-%m-%d"), stamp.strftime("%H"))
        rows = self._buffers.setdefault(key, [])
        rows.append(event)
        if len(rows) >= self.settings.row_group_rows:
            self._safely(functools.partial(self._flush, key))

    def _flush_all(self) -> None:
        for key in list(self._buffers):
            self._flush(key)

    def _flush(self, key: tuple[str, str]) -> None:
        events = self._buffers.pop(key, None)
        if not events:
            return
        table = _to_table(events)
        handle = self._files.get(key)
        if handle is None:
            self._sequence += 1
            date, hour = key
            directory = self.settings.directory / f"date={date}" / f"hour={hour}"
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

    def _close_file(self, key: tuple[str, str]) -> None:
        handle = self._files.pop(key, None)
        if handle is not None:
            handle.close()
            self.files_completed += 1


def _to_table(events: list[UsageEvent]) -> pa.Table:
    columns: dict[str, list[object]] = {name: [] for name in USAGE_COLUMNS}
    for event in events:
        for name in USAGE_COLUMNS:
            columns[name].append(getattr(event, name))
    columns["topics"] = [
        [dict(zip(_TOPIC_FIELDS, pair, strict=True)) for pair in event.topics] for event in events
    ]
    return pa.table(
        [pa.array(columns[field.name], field.type) for field in USAGE_SCHEMA],
        schema=USAGE_SCHEMA,
    )
