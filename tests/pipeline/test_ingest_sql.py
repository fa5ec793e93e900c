"""The JVM's request-log parser (Spark SQL) against the Python parser, line by line: the
same bucket, the same reason and the same event for every line of the fixtures and of
generated logs of both formats."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from quotagate.pipeline.ingest import gateway_of, parse_line
from quotagate.pipeline.ingest_sql import parse_lines

from .conftest import FIXTURES
from .request_logs import Broker, write_logs

pytestmark = pytest.mark.spark


def _canonical(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    reason = row.get("reason")
    if isinstance(reason, str) and reason.startswith("invalid JSON"):
        # Python's decoder says where the JSON broke; the JVM only that it did.
        row = {**row, "reason": "invalid JSON"}
    topics = row.get("topics")
    if topics is not None:
        row = {**row, "topics": tuple((t["topic"], t["bytes"]) for t in topics)}
    return tuple(sorted(row.items()))


def _python(files: list[Path], tz: timezone) -> list[tuple[tuple[str, Any], ...]]:
    rows = []
    for path in files:
        for line in path.read_text().splitlines():
            rows.append(parse_line(line, gateway_of(path.as_uri()), tz))
    return sorted((_canonical(r) for r in rows), key=repr)


def _jvm(spark: SparkSession, files: list[Path], tz: timezone) -> list[tuple[tuple[str, Any], ...]]:
    lines = spark.read.text([str(f) for f in files]).withColumn("file", F.input_file_name())
    rows = []
    for row in parse_lines(lines, tz).collect():
        parsed = row.asDict(recursive=True)
        if parsed["status"] != "ok":
            # The Python parser leaves out every fact of a line that is not an event.
            parsed = {k: parsed[k] for k in ("status", "reason", "line")}
        rows.append(parsed)
    return sorted((_canonical(r) for r in rows), key=repr)


@pytest.mark.parametrize("tz", [UTC, timezone(timedelta(hours=2))])
def test_fixtures_parse_alike_in_the_jvm_and_in_python(spark: SparkSession, tz: timezone) -> None:
    files = sorted((FIXTURES / "logs").iterdir())
    jvm, python = _jvm(spark, files, tz), _python(files, tz)
    assert len(jvm) == 18
    assert jvm == python


def test_generated_logs_parse_alike_in_the_jvm_and_in_python(
    spark: SparkSession, tmp_path: Path
) -> None:
    brokers = [
        Broker("broker-1", json_format=False, principals=("User:alice", "User:CN=x,OU=y")),
        Broker("broker-2", json_format=True, principals=("User:bob", "User:carol")),
    ]
    files = sorted(write_logs(tmp_path, brokers, lines=4000, seed=5).iterdir())
    jvm, python = _jvm(spark, files, UTC), _python(files, UTC)
    assert jvm == python
    statuses = {dict(row)["status"] for row in jvm}
    assert statuses == {"ok", "error", "other"}
    events = [dict(row) for row in jvm if dict(row)["status"] == "ok"]
    # Every kind of fact the parsers read is there to compare.
    assert {e["api_key"] for e in events} == {0, 1, 3, 19, 20}
    assert any(e["topics"] for e in events) and any(e["follower"] for e in events)
    assert sum(e["partition_mutations"] for e in events) > 0
    assert any(e["acks"] == 0 for e in events) and any(e["throttle_ms"] for e in events)
