"""``rollup``: usage per sharing key and per topic, per quota window, plus percentiles.

Sharing keys come from the engine (``sharing.resolve_pairs``) for the given quota file, or
for a template at one entity level when there is none. Tables written under ``out``:

- ``windows/``: per (quota type, sharing key, window): value, rate, requests, throttle;
  ``sustained_rate`` is the rate over the last ``quota.window.num - 1`` windows, which
  is what Kafka's Rate converges to for steady traffic;
- ``topics/``: produce bytes per (topic, window);
- ``entities/``: per (quota type, sharing key): totals and rate percentiles;
- ``tenants/``: the same per tenant, its members' usage combined (``pipeline.tenants``);
- ``summary.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812

from quotagate.pipeline.events import read_usage
from quotagate.pipeline.levels import template_quota_text
from quotagate.pipeline.quotas import parse_quotas, window_seconds
from quotagate.pipeline.sharing import resolve_pairs
from quotagate.pipeline.tables import write_json
from quotagate.pipeline.tenants import TENANTS_DIR, tenant_rollup
from quotagate.quota import OtherQuota, nanos_to_percentage
from quotagate.quota import request_rules as rules
from quotagate.quota.managers import WINDOW_NUM
from quotagate.quota.quota_file import broker_table

KEY_COLUMNS = ["quota_type", "share_user", "share_client", "entity_user", "entity_client"]
PERCENTILES = (0.5, 0.9, 0.95, 0.99)
CELL_COLUMNS: Final = (
    "principal",
    "client_id",
    "tenant",
    "api_key",
    "api_version",
    "acks",
    "follower",
    "validate_only",
    "throttle_cause",
)
"""What a cell groups by besides its window: everything the charging and the throttle of an
event depend on, so that one cell is charged exactly as each of its events would be."""


def rollup(
    spark: SparkSession,
    events_path: str | Path,
    out: str | Path,
    *,
    quota_text: str | None = None,
    level: str = "user",
) -> dict[str, Any]:
    """Read the usage events under ``events_path`` and write the tables of the module's
    docstring under ``out``; returns the summary. ``quota_text``: group by the sharing keys
    of that quota file (its limits kept); else by a template at ``level``."""
    quota_file = parse_quotas(quota_text if quota_text else template_quota_text(level))
    window_s = window_seconds(quota_file)
    events = read_usage(spark, events_path)
    # Every table is computed from these few rows per (client, kind of request, topic,
    # window), the rows the stream job keeps (pipeline.stream): both write equal tables.
    rows = cell_rows(with_event_time(events), window_s).cache()
    try:
        return rollup_cells(
            spark, cells_of(rows), topics_of(rows), out, quota_text=quota_text, level=level
        )
    finally:
        rows.unpersist()


def rollup_cells(
    spark: SparkSession,
    cells: DataFrame,
    topics: DataFrame,
    out: str | Path,
    *,
    quota_text: str | None = None,
    level: str = "user",
) -> dict[str, Any]:
    """The rollup's tables from usage cells (:func:`usage_cells`) and topic cells
    (:func:`topic_cells`) of one window size."""
    out = Path(out)
    configured = bool(quota_text)
    quota_file = parse_quotas(quota_text if quota_text else template_quota_text(level))
    window_s = window_seconds(quota_file)
    window_num = int(quota_file.gateway.get(WINDOW_NUM, 11))
    keys = _key_table(spark, cells, quota_text if configured else None, level)

    windows = per_window(cells, keys, window_s, window_num)
    windows.write.mode("overwrite").parquet(str(out / "windows"))
    windows = spark.read.parquet(str(out / "windows"))
    per_topic(topics, window_s).write.mode("overwrite").parquet(str(out / "topics"))
    entities = per_entity(windows).coalesce(1)
    entities.write.mode("overwrite").parquet(str(out / "entities"))

    tenants = tenant_rollup(
        cells,
        out / TENANTS_DIR,
        window_s,
        window_num,
        quota_file if configured else None,
        measures=measures,
        entities=per_entity,
    )
    span = cells.agg(F.min("first_ts_ms"), F.max("last_ts_ms"), F.sum("requests")).first()
    per_type = {
        row["quota_type"]: int(row["count"])
        for row in spark.read.parquet(str(out / "entities")).groupBy("quota_type").count().collect()
    }
    summary = {
        "events": int(span[2]) if span and span[2] is not None else 0,
        "first_ts_ms": span[0] if span else None,
        "last_ts_ms": span[1] if span else None,
        "window_seconds": window_s,
        "window_num": window_num,
        "grouping": "quota file" if configured else f"template ({level})",
        "sharing_keys": per_type,
        "tenants": tenants,
    }
    if configured:
        # What recommend carries into its file: the tenants it proposes quotas for are the
        # ones these rules name.
        summary["broker"] = broker_table(quota_file)
    write_json(out / "summary.json", summary)
    return summary


def with_event_time(events: DataFrame) -> DataFrame:
    """The events with ``event_time``, the timestamp of ``ts_ms`` that windows are cut on."""
    return events.withColumn("event_time", F.timestamp_millis(F.col("ts_ms")))


def cell_rows(events: DataFrame, window_s: int) -> DataFrame:
    """Events summed per :data:`CELL_COLUMNS`, ``topic`` and event-time window
    (``window_start_ms``). An event counts once, on the row of its first topic (or its only
    row, ``topic`` null, when it names none): ``requests``, the byte, time and mutation sums
    the quotas charge (``response_bytes`` of the requests not throttled), the throttle and
    the requests throttled; ``topic_bytes`` is the bytes each topic got, and
    ``first_ts_ms``/``last_ts_ms`` bound the events. ``events`` needs an ``event_time``
    column (:func:`with_event_time`); a stream's may carry a watermark, as the only
    aggregation it does is this one."""
    first = F.col("pos").isNull() | (F.col("pos") == 0)

    def once(column: Column) -> Column:
        return F.sum(F.when(first, column).otherwise(F.lit(0)).cast("long"))

    return (
        events.select("*", F.posexplode_outer("topics").alias("pos", "t"))
        .groupBy(
            F.window("event_time", f"{window_s} seconds").alias("w"),
            *CELL_COLUMNS,
            F.col("t.topic").alias("topic"),
        )
        .agg(
            once(F.lit(1)).alias("requests"),
            once(F.col("request_bytes")).alias("request_bytes"),
            # What the fetch quota kept: a throttled fetch is answered empty and its bytes
            # taken back, as Kafka does (quota.decision.settle), whichever quota throttled.
            once(F.when(F.col("throttle_ms") > 0, 0).otherwise(F.col("response_bytes"))).alias(
                "response_bytes"
            ),
            once(F.col("gateway_time_us") + F.col("upstream_time_us")).alias("time_us"),
            once(F.col("partition_mutations")).alias("partition_mutations"),
            once(F.col("throttle_ms")).alias("throttle_ms"),
            once((F.col("throttle_ms") > 0).cast("long")).alias("throttled_requests"),
            F.min("ts_ms").alias("first_ts_ms"),
            F.max("ts_ms").alias("last_ts_ms"),
            F.sum(F.col("t.bytes").cast("long")).alias("topic_bytes"),
        )
        .withColumn("window_start_ms", F.unix_millis(F.col("w.start")))
        .drop("w")
    )


CELL_SUMS: Final = (
    "requests",
    "request_bytes",
    "response_bytes",
    "time_us",
    "partition_mutations",
    "throttle_ms",
    "throttled_requests",
)


def cells_of(rows: DataFrame) -> DataFrame:
    """Usage cells: :func:`cell_rows` summed over topics, one row per
    (:data:`CELL_COLUMNS`, window)."""
    return rows.groupBy("window_start_ms", *CELL_COLUMNS).agg(
        *[F.sum(name).alias(name) for name in CELL_SUMS],
        F.min("first_ts_ms").alias("first_ts_ms"),
        F.max("last_ts_ms").alias("last_ts_ms"),
    )


def topics_of(rows: DataFrame) -> DataFrame:
    """Topic cells: bytes per (topic, window) from :func:`cell_rows`."""
    return (
        rows.where(F.col("topic").isNotNull())
        .groupBy("topic", "window_start_ms")
        .agg(F.sum("topic_bytes").alias("bytes"))
    )


def usage_cells(events: DataFrame, window_s: int) -> DataFrame:
    """:func:`cells_of` the events' :func:`cell_rows`."""
    return cells_of(cell_rows(events, window_s))


def topic_cells(events: DataFrame, window_s: int) -> DataFrame:
    """:func:`topics_of` the events' :func:`cell_rows`."""
    return topics_of(cell_rows(events, window_s))


def _key_table(
    spark: SparkSession, cells: DataFrame, quota_text: str | None, level: str
) -> DataFrame:
    """The engine's sharing key (and limit) for every observed (principal, client id)."""
    quota_file = parse_quotas(quota_text if quota_text else template_quota_text(level))
    pairs = [
        (row.principal, row.client_id)
        for row in cells.select("principal", "client_id").distinct().collect()
    ]
    rows = [
        (
            r.principal,
            r.client_id,
            r.quota_type,
            r.share_user,
            r.share_client,
            r.entity_user,
            r.entity_client,
            r.limit if quota_text else None,  # a template's limits mean nothing
        )
        for r in resolve_pairs(quota_file, pairs)
    ]
    return spark.createDataFrame(
        rows,
        "principal string, client_id string, quota_type string, share_user string, "
        "share_client string, entity_user string, entity_client string, quota_limit double",
    )


def measures(cells: DataFrame) -> DataFrame:
    """One row per (cell, quota type its requests are charged to): the charged ``value`` in
    the quota's unit, ``requests``, and the throttle of that quota type."""

    cells = _with_charging(cells)
    other = F.col("other_quota")
    percent_per_us = nanos_to_percentage(1000)
    mutations = (int(OtherQuota.STRICT_MUTATION), int(OtherQuota.PERMISSIVE_MUTATION))
    charged: list[tuple[str, Column, Column]] = [
        ("produce", other == int(OtherQuota.PRODUCE), F.col("request_bytes").cast("double")),
        ("fetch", other == int(OtherQuota.FETCH), F.col("response_bytes").cast("double")),
        ("request", F.col("request_time"), F.col("time_us") * percent_per_us),
        (
            "controller_mutation",
            other.isin(*mutations),
            F.col("partition_mutations").cast("double"),
        ),
    ]
    entries = F.array(
        *[
            F.when(
                condition,
                F.struct(
                    F.lit(name).alias("quota_type"),
                    value.alias("value"),
                    F.col("requests"),
                    F.when(F.col("throttle_cause") == name, F.col("throttle_ms"))
                    .otherwise(0)
                    .alias("throttle_ms"),
                    F.when(F.col("throttle_cause") == name, F.col("throttled_requests"))
                    .otherwise(0)
                    .alias("throttled_requests"),
                ),
            )
            for name, condition, value in charged
        ]
    )
    return (
        cells.select("principal", "client_id", "window_start_ms", F.explode(entries).alias("m"))
        .where(F.col("m").isNotNull())
        .select("principal", "client_id", "window_start_ms", "m.*")
    )


def _with_charging(events: DataFrame) -> DataFrame:
    """Each event (or cell) with the engine's charging of its kind of request (``request_rules``):
    classified once per distinct kind on the driver and broadcast, never restated in Spark."""
    # Nulls never match in an equi-join: the kind key uses -2 for "no acks".
    keyed = (
        events.withColumn("acks_key", F.coalesce(F.col("acks").cast("int"), F.lit(-2)))
        .withColumn("follower", F.coalesce(F.col("follower"), F.lit(False)))
        .withColumn("validate_only", F.coalesce(F.col("validate_only"), F.lit(False)))
    )
    kinds = keyed.select("api_key", "api_version", "acks_key", "follower", "validate_only")
    rows = []
    for kind in kinds.distinct().collect():
        charging = rules.classify(
            kind.api_key,
            kind.api_version,
            acks=None if kind.acks_key == -2 else kind.acks_key,
            follower=bool(kind.follower),
            validate_only=bool(kind.validate_only),
        )
        rows.append((*kind, charging.request_time, int(charging.other)))
    table = keyed.sparkSession.createDataFrame(
        rows,
        "api_key short, api_version short, acks_key int, follower boolean, "
        "validate_only boolean, request_time boolean, other_quota int",
    )
    return keyed.join(
        F.broadcast(table), ["api_key", "api_version", "acks_key", "follower", "validate_only"]
    )


def per_window(cells: DataFrame, keys: DataFrame, window_s: int, window_num: int) -> DataFrame:
    """Per (quota type, sharing key, window): value, rate, requests and throttles, and the
    ``sustained_rate`` over the last ``window_num - 1`` windows. ``keys``: the sharing key
    (and limit) of every (principal, client id, quota type), as :func:`_key_table` makes."""
    # With quota.window.num = 1 there are no earlier windows: the window is its own history.
    span_ms = max(window_num - 1, 1) * window_s * 1000
    sustained = (
        Window.partitionBy("quota_type", "share_user", "share_client")
        .orderBy("window_start_ms")
        .rangeBetween(-(span_ms - window_s * 1000), 0)
    )
    return (
        measures(cells)
        .join(F.broadcast(keys), ["principal", "client_id", "quota_type"])
        .groupBy(*KEY_COLUMNS, "quota_limit", "window_start_ms")
        .agg(
            F.sum("value").alias("value"),
            F.sum("requests").alias("requests"),
            F.sum("throttle_ms").cast("long").alias("throttle_ms"),
            F.sum("throttled_requests").cast("long").alias("throttled_requests"),
        )
        .withColumn("rate", F.col("value") / window_s)
        .withColumn("sustained_rate", F.sum("value").over(sustained) / (span_ms / 1000))
    )


def per_topic(topic_cells: DataFrame, window_s: int) -> DataFrame:
    """Produce bytes and rate per (topic, window), from topic cells (:func:`topic_cells`)."""
    return (
        topic_cells.groupBy("topic", "window_start_ms")
        .agg(F.sum("bytes").cast("long").alias("bytes"))
        .withColumn("rate", F.col("bytes") / window_s)
    )


def per_entity(windows: DataFrame) -> DataFrame:
    """Totals and rate percentiles per (quota type, sharing key), over the key's *active*
    windows: idle time says nothing about the quota a client needs while it works."""

    aggregates = [
        F.sum("value").alias("total"),
        F.sum("requests").alias("requests"),
        F.count(F.lit(1)).alias("active_windows"),
        F.max("rate").alias("max_rate"),
        F.max("sustained_rate").alias("max_sustained_rate"),
        F.sum("throttle_ms").alias("throttle_ms"),
        F.sum("throttled_requests").alias("throttled_requests"),
    ]
    for p in PERCENTILES:
        tag = f"p{round(p * 100)}"
        aggregates.append(F.percentile("rate", p).alias(f"{tag}_rate"))
        aggregates.append(F.percentile("sustained_rate", p).alias(f"{tag}_sustained_rate"))
    return windows.groupBy(*KEY_COLUMNS, "quota_limit").agg(*aggregates)
