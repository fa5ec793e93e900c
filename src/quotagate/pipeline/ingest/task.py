"""One ingest task's whole work, in the executor's Python worker: read its pieces of the
request logs, parse them a block at a time (``ingest.arrow``), write its events as
``date=…/hour=…/`` Parquet and hand back only its count of events and, folded per hash
bucket (``ingest.samples``), the count and least line of those that are not events. The
JVM schedules the task and sees neither events nor other loggers' lines.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timezone
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from quotagate.pipeline.ingest.arrow import REST_SCHEMA, parse_block
from quotagate.pipeline.ingest.read import Piece, read_lines
from quotagate.pipeline.ingest.reference import gateway_of
from quotagate.pipeline.ingest.samples import BucketFold
from quotagate.usage.schema import USAGE_SCHEMA

_HOUR_MS: Final = 3_600_000
# A row per (status, hash bucket) of the lines that are not events, one counting the events.
TASK_SCHEMA: Final = pa.schema([*REST_SCHEMA, ("lines", pa.int64()), ("bucket", pa.int64())])


@dataclass(frozen=True, slots=True)
class IngestJob:
    """What every task needs: its pieces, where events go, the logs' time zone."""

    pieces: tuple[tuple[Piece, ...], ...]
    out: str
    tz: timezone


def run_task(job: IngestJob, task: int) -> Iterator[pa.RecordBatch]:
    """The task's lines that are not events, folded per (status, hash bucket) to a count and
    a least line (a log of mostly other loggers' lines costs a few rows), then one row
    counting its events.

    Its files are written under hidden names of this attempt and renamed to
    ``part-TASK.parquet`` only once the task has written everything: a failed, retried or
    speculative attempt of the same task leaves at most a hidden file readers skip, never
    a second copy of its events."""
    writers: _Writers = {}
    events = 0
    rest = BucketFold()
    try:
        for piece in job.pieces[task]:
            gateway_id = gateway_of(Path(piece.path).as_uri())
            for lines in read_lines(piece):
                block = parse_block(lines, gateway_id, job.tz)
                events += block.events.num_rows
                _write(block.events, Path(job.out), task, writers)
                rest.add(block.rest)
    except BaseException:
        for writer, hidden, _ in writers.values():
            writer.close()
            hidden.unlink(missing_ok=True)
        raise
    for writer, hidden, final in writers.values():
        writer.close()
        os.replace(hidden, final)
    yield from pa.table(rest.rows(), schema=TASK_SCHEMA).to_batches()
    counted = {"status": ["ok"], "reason": [None], "line": [None], "lines": [events], "bucket": [0]}
    yield from pa.table(counted, schema=TASK_SCHEMA).to_batches()


_Writers = dict[tuple[str, str], tuple[pq.ParquetWriter, Path, Path]]
"""Per (date, hour): the open writer, its hidden file, the name it gets when complete."""


def _write(events: pa.Table, out: Path, task: int, writers: _Writers) -> None:
    """Each hour's events, in time order, onto the task's file of that hour."""
    if not events.num_rows:
        return
    stamps = np.asarray(events["ts_ms"].to_numpy(), np.int64)
    order = np.argsort(stamps, kind="stable")
    events = events.take(pa.array(order))
    hours = stamps[order] // _HOUR_MS
    bounds = np.flatnonzero(np.diff(hours)) + 1
    for begin, end in zip(np.r_[0, bounds], np.r_[bounds, len(hours)], strict=True):
        stamp = datetime.fromtimestamp(int(hours[begin]) * 3600, UTC)
        key = (stamp.strftime("%Y-%m-%d"), stamp.strftime("%H"))
        open_file = writers.get(key)
        if open_file is None:
            directory = out / f"date={key[0]}" / f"hour={key[1]}"
            directory.mkdir(parents=True, exist_ok=True)
            hidden = directory / f".part-{task:05d}-{uuid.uuid4().hex}.inprogress"
            final = directory / f"part-{task:05d}.parquet"
            open_file = writers[key] = (pq.ParquetWriter(hidden, USAGE_SCHEMA), hidden, final)
        open_file[0].write_table(events.slice(int(begin), int(end - begin)))
