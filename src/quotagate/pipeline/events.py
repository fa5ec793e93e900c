"""Reading and writing usage-event tables (the schema of ``quotagate.usage.schema``).

Input is checked with pyarrow *before* Spark sees it, so a wrong column or type is
reported in one readable sentence instead of a JVM stack trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from quotagate.pipeline.errors import PipelineError
from quotagate.usage.schema import OPTIONAL_COLUMNS, USAGE_COLUMNS, USAGE_SCHEMA

# Directory levels the gateway's writer (and our writers) partition by.
PARTITION_COLUMNS: Final = ("date", "hour")


def usage_spark_schema() -> StructType:
    return from_arrow_schema(USAGE_SCHEMA)


def check_usage_dataset(path: str | Path) -> None:
    """Raise PipelineError unless ``path`` holds Parquet files with the usage schema.

    Columns the schema does not name are allowed and ignored: a newer gateway may write
    more than this pipeline reads."""
    found = _arrow_schema(path)
    columns = [name for name in found.names if name not in PARTITION_COLUMNS]
    missing = [
        name for name in USAGE_COLUMNS if name not in columns and name not in OPTIONAL_COLUMNS
    ]
    problems: list[str] = []
    if missing:
        problems.append(f"missing column(s): {', '.join(missing)}")
    for expected in USAGE_SCHEMA:
        if expected.name in columns:
            actual = found.field(expected.name).type
            if not _same_type(actual, expected.type):
                problems.append(
                    f"column {expected.name!r} has type {actual}, expected {expected.type}"
                )
    if problems:
        raise PipelineError(f"{path} is not a usage-event table: " + "; ".join(problems))


def read_usage(spark: SparkSession, path: str | Path) -> DataFrame:
    """The usage events under ``path``, checked, with exactly the schema's columns (any
    other column is left out)."""
    check_usage_dataset(path)
    frame = spark.read.option("basePath", str(path)).parquet(str(path))
    for name in OPTIONAL_COLUMNS:
        if name not in frame.columns:
            spark_type = from_arrow_schema(pa.schema([USAGE_SCHEMA.field(name)]))[0].dataType
            frame = frame.withColumn(name, F.lit(OPTIONAL_COLUMNS[name]).cast(spark_type))
    # A request before SASL authentication names nobody: Kafka's request log never has one
    # (its authenticator answers them), and gateways since issue 36 write none. Files from
    # earlier gateways hold their ApiVersions with principal "": left out, so that rollup,
    # replay and report count the same requests as the gateway's quotas did.
    return frame.where(F.col("principal") != "").select(*USAGE_COLUMNS)


def write_usage(frame: DataFrame, path: str | Path, *, shuffle: bool = True) -> None:
    """Write events as ``date=YYYY-MM-DD/hour=HH/`` Parquet, like the gateway does.

    With ``shuffle`` each hour's events are gathered into one task first (one file per
    hour); without, every task writes its own rows into their hours (a file per task and
    hour, and no shuffle: what a one-pass ingest of a time-ordered log wants)."""
    stamp = F.timestamp_millis(F.col("ts_ms"))
    frame = (
        frame.select(*USAGE_COLUMNS)
        .withColumn("date", F.date_format(stamp, "yyyy-MM-dd"))
        .withColumn("hour", F.date_format(stamp, "HH"))
    )
    if shuffle:
        frame = frame.repartition("date", "hour").sortWithinPartitions("ts_ms")
    else:
        frame = frame.sortWithinPartitions("date", "hour", "ts_ms")
    frame.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(str(path))


def _arrow_schema(path: str | Path) -> pa.Schema:
    root = Path(path)
    if not root.exists():
        raise PipelineError(f"{root} does not exist")
    try:
        dataset = ds.dataset(str(root), format="parquet", partitioning="hive")
    except (pa.ArrowInvalid, OSError) as exc:
        raise PipelineError(f"{root} is not readable as Parquet: {exc}") from None
    if not dataset.files:
        raise PipelineError(f"{root} holds no Parquet files (empty directory?)")
    return dataset.schema


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    # Spark and pyarrow name list items differently ("element" vs "item"); nullability
    # does not matter either. Compare the shape of the type only.
    if pa.types.is_list(expected):
        return bool(pa.types.is_list(actual)) and _same_type(actual.value_type, expected.value_type)
    if pa.types.is_struct(expected):
        if not pa.types.is_struct(actual) or actual.num_fields != expected.num_fields:
            return False
        return all(
            actual.field(i).name == expected.field(i).name
            and _same_type(actual.field(i).type, expected.field(i).type)
            for i in range(expected.num_fields)
        )
    if pa.types.is_string(expected):
        return bool(pa.types.is_string(actual) or pa.types.is_large_string(actual))
    return bool(actual.equals(expected))
