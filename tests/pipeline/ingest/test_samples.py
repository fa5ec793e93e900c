"""The report's samples: one rule in a task's Python and in Spark SQL, and the same rows
however a task's lines were split into blocks or tasks."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from quotagate.pipeline.ingest.arrow import REST_SCHEMA
from quotagate.pipeline.ingest.samples import SAMPLE_BUCKETS, BucketFold, bucket_of, spark_bucket

LINES = st.lists(
    st.tuples(st.sampled_from(["error", "other"]), st.text(min_size=1, max_size=12)),
    max_size=60,
)


def _table(rows: list[tuple[str, str]]) -> pa.Table:
    return pa.table(
        {
            "status": [status for status, _ in rows],
            "reason": [f"because {status}" if status == "error" else None for status, _ in rows],
            "line": [line for _, line in rows],
        },
        schema=REST_SCHEMA,
    )


@given(LINES, st.integers(min_value=0, max_value=60))
def test_folding_in_blocks_gives_what_folding_at_once_gives(
    rows: list[tuple[str, str]], cut: int
) -> None:
    at_once, in_blocks = BucketFold(), BucketFold()
    at_once.add(_table(rows))
    in_blocks.add(_table(rows[:cut]))
    in_blocks.add(_table(rows[cut:]))
    assert in_blocks.rows() == at_once.rows()
    folded = at_once.rows()
    assert sum(folded["lines"]) == len(rows)  # type: ignore[arg-type]
    for status, line, bucket in zip(
        folded["status"], folded["line"], folded["bucket"], strict=True
    ):
        same = [text for s, text in rows if s == status and bucket_of(text) == bucket]
        assert line == min(same)


@pytest.mark.spark
def test_spark_puts_every_line_in_the_bucket_python_does(spark: SparkSession) -> None:
    lines = ["", "a", "é ünïcode ✓", "[2026-11-28 05:00:00,000] DEBUG x", "x" * 5000]
    frame = spark.createDataFrame([(line,) for line in lines], "line string")
    buckets = [row.b for row in frame.select(spark_bucket(F.col("line")).alias("b")).collect()]
    assert buckets == [bucket_of(line) for line in lines]
    assert all(0 <= b < SAMPLE_BUCKETS for b in buckets)
