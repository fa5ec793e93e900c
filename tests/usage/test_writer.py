"""The usage-event writer: hourly partitions, rolls by size, never blocks the data path."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds

from quotagate.usage.schema import USAGE_COLUMNS, USAGE_SCHEMA, UsageEvent
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


def test_a_row_is_a_usage_event_in_column_order() -> None:
    # The gateway adds rows, not events: the two must line up field for field.
    assert tuple(f.name for f in dataclasses.fields(UsageEvent)) == USAGE_COLUMNS


def test_flush_hands_a_partial_batch_to_the_writer_thread(tmp_path: Path) -> None:
    writer = UsageWriter(UsageWriterSettings(tmp_path, "g", flush_interval_s=0.05))
    assert writer.add(dataclasses.astuple(_event(1_700_000_000_000, 1)))
    writer.flush()
    deadline = time.monotonic() + 30
    while writer.written < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.written == 1, "written while the writer is still open"
    writer.close()
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    assert table.column("client_id").to_pylist() == ["c1"]


def test_the_first_flush_imports_nothing(tmp_path: Path) -> None:
    # An import on the writer thread holds the GIL, stalling the event loop mid-traffic
    # (pyarrow's first conversion imports pandas: ~0.3 s). A fresh interpreter, so that
    # nothing an earlier test imported hides it.
    script = f"""
import dataclasses, sys
from pathlib import Path
from quotagate.usage.schema import UsageEvent
from quotagate.usage.writer import UsageWriter, UsageWriterSettings
writer = UsageWriter(UsageWriterSettings(Path({str(tmp_path)!r}), "g"))
event = UsageEvent(
    ts_ms=1_700_000_000_000, gateway_id="g", listener="PLAINTEXT", principal="User:a",
    client_id="c", client_host="127.0.0.1", api_key=0, api_version=9, request_bytes=1,
    topics=[("t", 1)],
)
before = set(sys.modules)
writer.add(dataclasses.astuple(event))
writer.close()
assert writer.written == 1
print(sorted(set(sys.modules) - before))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
