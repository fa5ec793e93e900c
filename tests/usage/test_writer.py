"""The usage-event writer: hourly partitions, rolls by size, never blocks the data path."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.dataset as ds

from quotagate.usage.schema import USAGE_SCHEMA, UsageEvent
from quotagate.usage.writer import UsageWriter, UsageWriterSettings


def _event(ts_ms: int, n: int = 0) -> UsageEvent:
    return UsageEvent(
        ts_ms=ts_ms,
        gateway_id="g",
        listener="PLAINTEXT",
        principal="User:ANONYMOUS",
        client_id=f"c{n}",
        client_host="127.0.0.1",
        api_key=0,
        api_version=9,
        request_bytes=100 + n,
        topics=[("t", n)],
    )


def test_usage_writer_partitions_rolls_and_flushes(tmp_path: Path) -> None:
    writer = UsageWriter(UsageWriterSettings(tmp_path, "g", roll_bytes=2000, row_group_rows=10))
    hour = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
    for n in range(100):
        writer.submit(_event(hour + n, n))
    writer.submit(_event(hour + 3_600_000, 100))  # the next hour
    writer.close()
    files = sorted(tmp_path.rglob("*.parquet"))
    assert {f.parent.name for f in files} == {"hour=22", "hour=23"}
    assert len(files) > 2, "rolled by size"
    assert not list(tmp_path.rglob(".*inprogress"))
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("request_bytes").to_pylist()) == [100 + n for n in range(101)]
    assert table.select(USAGE_SCHEMA.names).schema == USAGE_SCHEMA
    assert writer.dropped == 0 and writer.written == 101


def test_usage_writer_drops_instead_of_blocking(tmp_path: Path) -> None:
    writer = UsageWriter(UsageWriterSettings(tmp_path, "g", queue_size=5, flush_interval_s=60))
    started = time.monotonic()
    accepted = sum(writer.submit(_event(1_700_000_000_000, n)) for n in range(10_000))
    assert time.monotonic() - started < 2
    writer.close()
    assert writer.dropped == 10_000 - accepted > 0
    assert writer.written == accepted
    assert not writer.submit(_event(1_700_000_000_000))
