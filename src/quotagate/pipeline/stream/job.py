"""``stream``: the usage topic (``[usage] sink = "kafka"``) into the rollup tables, kept current.

A Structured Streaming query on Spark's own Kafka connector (``spark-sql-kafka-0-10``):
records of encoding version 1 (``quotagate.usage.stream``) are parsed with ``from_json``,
timed by their ``ts_ms`` (event time, with a watermark: an event later than that behind the
newest one seen is left out) and summed into the rollup's cell rows
(``rollup.cell_rows``) per quota window, in Spark's state store. Every micro-batch writes
the cell rows it changed to ``OUT/cells/batch=N/`` (compacted now and then: ``cells.py``)
and then rewrites ``OUT/rollup/`` from all of them, each cell row taken from the latest
batch that wrote it, through the batch rollup's own ``rollup_cells``: ``recommend`` and
``report`` read ``OUT/rollup`` exactly as they read a batch rollup.

Exactly once: the checkpoint (``OUT/checkpoint``) records which offsets batch N reads
before the batch runs and the state after; a job killed mid-batch reruns batch N from the
same offsets and the same state on restart, and batch N's directory is overwritten whole,
so a batch's rows are never counted twice or lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import IntegerType, StructField, StructType

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.events import usage_spark_schema
from quotagate.pipeline.levels import template_quota_text
from quotagate.pipeline.quotas import parse_quotas, window_seconds
from quotagate.pipeline.rollup import cell_rows, cells_of, rollup_cells, topics_of, with_event_time
from quotagate.pipeline.stream import cells
from quotagate.usage.schema import USAGE_COLUMNS
from quotagate.usage.stream import SCHEMA_VERSION, VERSION_FIELD

ROLLUP_DIR: Final = "rollup"
CHECKPOINT_DIR: Final = "checkpoint"
CONNECTOR: Final = "spark-sql-kafka-0-10"


@dataclass(frozen=True, slots=True)
class StreamOptions:
    bootstrap_servers: str
    topic: str
    quota_text: str | None = None
    level: str = "user"
    trigger_s: float = 10.0
    watermark_s: float = 600.0
    """How far behind the newest event time an event may arrive and still count."""
    available_now: bool = False
    """Read what the topic holds now, keep the tables, and stop (Spark's availableNow)."""
    max_offsets_per_trigger: int | None = None
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    """Further ``kafka.*`` source options: the cluster's security, e.g.
    ``kafka.security.protocol``."""


def connector_coordinate(pyspark_version: str, scala_version: str) -> str:
    """The Maven coordinate of Spark's Kafka connector for this Spark, for ``--packages``."""
    scala = ".".join(scala_version.split(".")[:2])
    return f"org.apache.spark:{CONNECTOR}_{scala}:{pyspark_version}"


def stream(spark: SparkSession, options: StreamOptions, out: str | Path) -> None:
    """Run the query until it stops (``available_now``) or fails; the tables under
    ``OUT/rollup`` are current after every micro-batch."""
    out = Path(out)
    quota_file = parse_quotas(
        options.quota_text if options.quota_text else template_quota_text(options.level)
    )
    window_s = window_seconds(quota_file)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", options.bootstrap_servers)
        .option("subscribe", options.topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.kafka_options.items():
        reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
    if options.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", options.max_offsets_per_trigger)
    try:
        records = reader.load()
    except Exception as exc:
        if "kafka" in str(exc).lower() and "data source" in str(exc).lower():
            raise PipelineError(_missing_connector(spark)) from None
        raise
    events = with_event_time(parse_records(records)).withWatermark(
        "event_time", f"{int(options.watermark_s)} seconds"
    )

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        cells.write_batch(batch, out, batch_id)
        cells.compact_if_due(batch.sparkSession, out, batch_id)
        refresh_rollup(batch.sparkSession, out, quota_text=options.quota_text, level=options.level)

    writer = (
        cell_rows(events, window_s)
        .writeStream.outputMode("update")
        .option("checkpointLocation", str(out / CHECKPOINT_DIR))
        .foreachBatch(write_batch)
    )
    if options.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{options.trigger_s} seconds")
    query = writer.start()
    query.awaitTermination()


def parse_records(records: DataFrame) -> DataFrame:
    """Usage events from the topic's records, with the usage columns: version 1 only (a
    record of another version is not misread as this one)."""
    schema = StructType([*usage_spark_schema().fields, StructField(VERSION_FIELD, IntegerType())])
    parsed = records.select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
    # As the batch rollup reads files (events.read_usage): a request before authentication
    # names nobody and is left out.
    current = (F.col(f"e.{VERSION_FIELD}") == SCHEMA_VERSION) & (F.col("e.principal") != "")
    return parsed.where(current).select(*[F.col(f"e.{name}") for name in USAGE_COLUMNS])


def refresh_rollup(
    spark: SparkSession, out: Path, *, quota_text: str | None = None, level: str = "user"
) -> dict[str, Any]:
    """Rewrite ``OUT/rollup`` from every batch's cell rows, the latest of each."""
    rows = cells.current_cells(spark, out).cache()
    try:
        return rollup_cells(
            spark,
            cells_of(rows),
            topics_of(rows),
            out / ROLLUP_DIR,
            quota_text=quota_text,
            level=level,
        )
    finally:
        rows.unpersist()


def _missing_connector(spark: SparkSession) -> str:
    version = spark.version
    scala = spark.sparkContext._jvm.scala.util.Properties.versionNumberString()  # type: ignore[union-attr]
    return (
        f"Spark's Kafka connector is not on the class path: run with --packages "
        f"{connector_coordinate(version, str(scala))} (fetched from Maven Central), or "
        "--jars DIR with its jars (`python tools/jars.py spark-kafka` fetches them)"
    )
