"""``replay``: a candidate quota configuration run over recorded events on Spark.

Events are grouped so that every group can run on its own engine instance (see
``sharing.replay_groups``). Whole groups are dealt to Spark partitions, largest first onto
the lightest partition, and each partition is replayed in time order by ``replay_core``
inside ``mapInArrow``: one engine per partition (its groups share no sensor, so one engine
decides exactly as one per group would), one shuffle, no per-group sort in the JVM, and the
columns the replay does not read stay in Arrow. The per-request predictions are then
summarised per client entity and time bucket in one aggregation.
"""

from __future__ import annotations

import heapq
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import ArrayType, StructField, StructType

from quotagate.pipeline.events import read_usage
from quotagate.pipeline.quotas import parse_quotas
from quotagate.pipeline.replay_core import ORDER_COLUMNS, PREDICTION_TYPES, replay_table
from quotagate.pipeline.sharing import replay_groups
from quotagate.pipeline.tables import write_json
from quotagate.quota.request_rules import MUTATION_APIS

HEATMAP_BUCKETS = 48
# What replay_core orders and classifies by, plus what the summaries compare with.
_REPLAY_INPUT = [
    *ORDER_COLUMNS,
    "acks",
    "follower",
    "validate_only",
    "gateway_id",
    "throttle_ms",
    "throttle_cause",
    "error_code",
]
_CLIENT = ["principal", "client_id"]


def replay(
    spark: SparkSession,
    events_path: str | Path,
    quota_text: str,
    out: str | Path,
    *,
    closed_loop: bool = False,
) -> dict[str, Any]:
    """Replay and write ``requests/``, ``entities/``, ``heatmap/`` and ``summary.json``."""
    out = Path(out)
    started = time.perf_counter()
    usage = read_usage(spark, events_path)
    # Per-topic counts matter only to mutations (charged topic by topic); a produce's list of
    # topics would only weigh on the shuffle.
    mutation_topics = F.when(F.col("api_key").isin(*MUTATION_APIS), F.col("topics"))
    events = usage.select(*_REPLAY_INPUT, mutation_topics.alias("topics"))
    replayed, (lo, hi) = replay_dataframe(spark, events, quota_text, closed_loop=closed_loop)
    replayed.write.mode("overwrite").parquet(str(out / "requests"))
    replay_s = time.perf_counter() - started
    cells = _cells(spark.read.parquet(str(out / "requests")), lo, hi)
    _write_table(entity_summary(cells), out / "entities")
    _write_table(throttle_heatmap(cells), out / "heatmap")
    events_n = int(cells["requests"].sum())
    summary = {
        "mode": "closed" if closed_loop else "open",
        "events": events_n,
        "throttled_requests": int(cells["throttled_requests"].sum()),
        "recorded_throttled_requests": int(cells["recorded_throttled_requests"].sum()),
        "agreement_with_recorded": int(cells["agree"].sum()) / events_n if events_n else 1.0,
        "rejected_mutation_requests": int(cells["rejected_requests"].sum()),
        "replay_seconds": round(replay_s, 3),
        "events_per_second": round(events_n / replay_s, 1) if replay_s else None,
    }
    write_json(out / "summary.json", summary)
    return summary


def replay_dataframe(
    spark: SparkSession, events: DataFrame, quota_text: str, *, closed_loop: bool
) -> tuple[DataFrame, tuple[int, int]]:
    """Per-request predictions (lazy): the input columns plus replay_core's columns; and the
    first and last event time (0, 0 without events), counted on the way."""

    quota_file = parse_quotas(quota_text)
    counted = (
        events.groupBy(*_CLIENT)
        .agg(
            F.count(F.lit(1)).alias("count"), F.min("ts_ms").alias("lo"), F.max("ts_ms").alias("hi")
        )
        .collect()
    )
    groups = replay_groups(quota_file, [(r.principal, r.client_id) for r in counted])
    sizes: dict[int, int] = {}
    for r in counted:
        group = groups[(r.principal, r.client_id)]
        sizes[group] = sizes.get(group, 0) + int(r["count"])
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    label = _partition_labels(spark, partitions)
    placed = {g: label[p] for g, p in _deal(sizes, partitions).items()}
    slot_table = spark.createDataFrame(
        [(p, c, placed[g]) for (p, c), g in groups.items()],
        "principal string, client_id string, replay_slot long",
    )
    # Spark's Arrow exchange with Python is slow on nested columns even when they are null
    # (measured: the list of topic structs cost the JVM as much as the other 17 columns):
    # topics cross it as JSON text, null but on mutations, and are parsed back after.
    topics_type = events.schema["topics"].dataType if "topics" in events.columns else None
    if not isinstance(topics_type, ArrayType):
        topics_type = None
    if topics_type is not None:
        events = events.withColumn("topics", F.to_json("topics"))
    names = events.columns
    schema = StructType(
        [
            *events.schema.fields,
            *(StructField(n, from_arrow_type(t)) for n, t in PREDICTION_TYPES.items()),
        ]
    )
    output = [*names, *PREDICTION_TYPES]

    def run_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # A partition that no group was dealt to gets no batch at all (fewer groups than
        # partitions: a cluster with a handful of principals), and Arrow cannot build a
        # table from nothing without a schema.
        received = [batch for batch in batches if batch.num_rows]
        if not received:
            return
        table = pa.Table.from_batches(received)
        yield from (
            replay_table(table.select(names), quota_text, closed_loop).select(output).to_batches()
        )

    replayed = (
        events.join(F.broadcast(slot_table), _CLIENT)
        .repartition(partitions, "replay_slot")
        .mapInArrow(run_partition, schema)
    )
    if topics_type is not None:
        replayed = replayed.withColumn("topics", F.from_json("topics", topics_type))
    bounds = (
        min((int(r["lo"]) for r in counted), default=0),
        max((int(r["hi"]) for r in counted), default=0),
    )
    return replayed, bounds


def _deal(sizes: dict[int, int], partitions: int) -> dict[int, int]:
    """Partition per group: largest group first onto the lightest partition, so that the
    two cores of a small machine finish together instead of one waiting on a big group."""
    load = [(0, p) for p in range(partitions)]
    placed: dict[int, int] = {}
    for group, size in sorted(sizes.items(), key=lambda item: (-item[1], item[0])):
        total, partition = heapq.heappop(load)
        placed[group] = partition
        heapq.heappush(load, (total + size, partition))
    return placed


def _partition_labels(spark: SparkSession, partitions: int) -> list[int]:
    """For each partition, a long that ``repartition(partitions, column)`` sends there.

    Spark places rows by the Murmur3 hash of the column; asking Spark for it keeps this exact
    on any version. A partition without a label found (never seen) falls back to label 0:
    it costs balance only, never correctness, since whole groups move together either way.
    """
    rows = (
        spark.range(64 * partitions)
        .select("id", F.expr(f"pmod(hash(id), {partitions})").alias("partition"))
        .collect()
    )
    label: dict[int, int] = {}
    for row in rows:
        label.setdefault(int(row["partition"]), int(row["id"]))
    return [label.get(p, 0) for p in range(partitions)]


def _cells(requests: DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """Per client and heatmap bucket (from ``lo`` to ``hi``), every count the summaries
    need: one Spark job over the written requests instead of one per summary."""
    width = max(1, (hi - lo) // HEATMAP_BUCKETS + 1)
    throttle = F.col("predicted_throttle_ms")
    delayed_bytes = F.when(
        F.col("delay_ms") > 0, F.col("request_bytes") + F.col("response_bytes")
    ).otherwise(0)

    def count(condition: Any) -> Any:
        return F.sum(condition.cast("long"))

    cells = (
        requests.withColumn("bucket", ((F.col("ts_ms") - lo) / width).cast("int"))
        .groupBy(*_CLIENT, "bucket")
        .agg(
            F.count(F.lit(1)).alias("requests"),
            count(throttle > 0).alias("throttled_requests"),
            F.sum(throttle).cast("long").alias("total_throttle_ms"),
            F.max(throttle).alias("max_throttle_ms"),
            F.sum(delayed_bytes).cast("long").alias("delayed_bytes"),
            count(F.col("predicted_error_code") != 0).alias("rejected_requests"),
            F.sum(F.col("request_bytes") + F.col("response_bytes")).cast("long").alias("bytes"),
            count(F.col("throttle_ms") > 0).alias("recorded_throttled_requests"),
            count(throttle == F.col("throttle_ms")).alias("agree"),
        )
        .withColumn("bucket_start_ms", F.col("bucket") * width + lo)
    )
    return cells.toPandas()


def entity_summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per client (principal, client id): how the candidate quotas would have treated it."""
    sums = [
        "requests",
        "throttled_requests",
        "total_throttle_ms",
        "delayed_bytes",
        "rejected_requests",
        "bytes",
        "recorded_throttled_requests",
    ]
    grouped = cells.groupby(_CLIENT, sort=False)
    entities = grouped[sums].sum().astype("int64")
    entities["max_throttle_ms"] = grouped["max_throttle_ms"].max().astype("int32")
    entities["throttled_fraction"] = entities["throttled_requests"] / entities["requests"]
    columns = [
        "requests",
        "throttled_requests",
        "throttled_fraction",
        "total_throttle_ms",
        "max_throttle_ms",
        *sums[3:],
    ]
    ordered = entities[columns].sort_values("total_throttle_ms", ascending=False, kind="stable")
    return ordered.reset_index()


def throttle_heatmap(cells: pd.DataFrame) -> pd.DataFrame:
    """Predicted throttle per client and time bucket (a fixed number of buckets)."""
    heatmap = cells[[*_CLIENT, "bucket", "total_throttle_ms", "requests", "bucket_start_ms"]]
    return heatmap.rename(columns={"total_throttle_ms": "throttle_ms"}).astype(
        {"bucket": "int32", "throttle_ms": "int64", "requests": "int64", "bucket_start_ms": "int64"}
    )


def _write_table(frame: pd.DataFrame, path: Path) -> None:
    """A small summary as one Parquet file in its own directory, as Spark's writer lays it
    out, written from the driver: a Spark job per summary costs more than the summary."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path / "part-00000.parquet")
