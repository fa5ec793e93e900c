"""``replay``: a candidate quota configuration run over recorded events on Spark.

Events are grouped so that every group can run on its own engine instance (see
``sharing.replay_groups``), each group is replayed in time order by ``replay_core`` inside
``applyInPandas``, and the per-request predictions are summarised per client entity.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import IntegerType, LongType, ShortType, StringType, StructField, StructType

from quotagate.pipeline.events import read_usage
from quotagate.pipeline.quotas import parse_quotas
from quotagate.pipeline.replay_core import ORDER_COLUMNS, replay_frame
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
    replayed = replay_dataframe(spark, events, quota_text, closed_loop=closed_loop)
    replayed.write.mode("overwrite").parquet(str(out / "requests"))
    replay_s = time.perf_counter() - started
    requests = spark.read.parquet(str(out / "requests"))
    entity_summary(requests).coalesce(1).write.mode("overwrite").parquet(str(out / "entities"))
    throttle_heatmap(requests).coalesce(1).write.mode("overwrite").parquet(str(out / "heatmap"))
    totals = _totals(requests)
    summary = {
        "mode": "closed" if closed_loop else "open",
        "events": totals["events"],
        "throttled_requests": totals["throttled"],
        "recorded_throttled_requests": totals["recorded_throttled"],
        "agreement_with_recorded": totals["agree"] / totals["events"] if totals["events"] else 1.0,
        "rejected_mutation_requests": totals["rejected"],
        "replay_seconds": round(replay_s, 3),
        "events_per_second": round(totals["events"] / replay_s, 1) if replay_s else None,
    }
    write_json(out / "summary.json", summary)
    return summary


def replay_dataframe(
    spark: SparkSession, events: DataFrame, quota_text: str, *, closed_loop: bool
) -> DataFrame:
    """Per-request predictions (lazy): the input columns plus replay_core's columns."""

    quota_file = parse_quotas(quota_text)
    pairs = [
        (r.principal, r.client_id)
        for r in events.select("principal", "client_id").distinct().collect()
    ]
    groups = replay_groups(quota_file, pairs)
    group_table = spark.createDataFrame(
        [(p, c, g) for (p, c), g in groups.items()],
        "principal string, client_id string, replay_group long",
    )
    columns = events.columns
    schema = StructType(
        [
            *events.schema.fields,
            StructField("replay_ts_ms", LongType()),
            StructField("predicted_throttle_ms", IntegerType()),
            StructField("predicted_cause", StringType()),
            StructField("predicted_error_code", ShortType()),
            StructField("delay_ms", LongType()),
        ]
    )

    def run_group(frame: pd.DataFrame) -> pd.DataFrame:
        return replay_frame(frame[columns], quota_text, closed_loop)

    return (
        events.join(F.broadcast(group_table), ["principal", "client_id"])
        .groupBy("replay_group")
        .applyInPandas(run_group, schema)
    )


def entity_summary(requests: DataFrame) -> DataFrame:
    """Per client (principal, client id): how the candidate quotas would have treated it."""

    throttled = F.col("predicted_throttle_ms") > 0
    delayed_bytes = F.when(
        F.col("delay_ms") > 0, F.col("request_bytes") + F.col("response_bytes")
    ).otherwise(0)
    return (
        requests.groupBy("principal", "client_id")
        .agg(
            F.count(F.lit(1)).alias("requests"),
            F.sum(throttled.cast("long")).alias("throttled_requests"),
            F.avg(throttled.cast("double")).alias("throttled_fraction"),
            F.sum("predicted_throttle_ms").cast("long").alias("total_throttle_ms"),
            F.max("predicted_throttle_ms").alias("max_throttle_ms"),
            F.sum(delayed_bytes).cast("long").alias("delayed_bytes"),
            F.sum((F.col("predicted_error_code") != 0).cast("long")).alias("rejected_requests"),
            F.sum(F.col("request_bytes") + F.col("response_bytes")).cast("long").alias("bytes"),
            F.sum((F.col("throttle_ms") > 0).cast("long")).alias("recorded_throttled_requests"),
        )
        .orderBy(F.desc("total_throttle_ms"))
    )


def throttle_heatmap(requests: DataFrame) -> DataFrame:
    """Predicted throttle per client and time bucket (a fixed number of buckets)."""

    bounds = requests.agg(F.min("ts_ms").alias("lo"), F.max("ts_ms").alias("hi")).first()
    lo = int(bounds["lo"]) if bounds and bounds["lo"] is not None else 0
    hi = int(bounds["hi"]) if bounds and bounds["hi"] is not None else 0
    width = max(1, (hi - lo) // HEATMAP_BUCKETS + 1)
    return (
        requests.withColumn("bucket", ((F.col("ts_ms") - lo) / width).cast("int"))
        .groupBy("principal", "client_id", "bucket")
        .agg(
            F.sum("predicted_throttle_ms").cast("long").alias("throttle_ms"),
            F.count(F.lit(1)).alias("requests"),
        )
        .withColumn("bucket_start_ms", F.col("bucket") * width + lo)
    )


def _totals(requests: DataFrame) -> dict[str, int]:

    row = requests.agg(
        F.count(F.lit(1)).alias("events"),
        F.sum((F.col("predicted_throttle_ms") > 0).cast("long")).alias("throttled"),
        F.sum((F.col("throttle_ms") > 0).cast("long")).alias("recorded_throttled"),
        F.sum((F.col("predicted_throttle_ms") == F.col("throttle_ms")).cast("long")).alias("agree"),
        F.sum((F.col("predicted_error_code") != 0).cast("long")).alias("rejected"),
    ).first()
    return (
        {
            key: int(row[key] or 0)
            for key in ("events", "throttled", "recorded_throttled", "agree", "rejected")
        }
        if row
        else {}
    )
