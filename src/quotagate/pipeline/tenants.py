"""The pipeline per tenant (issue 25): a tenant's usage is its members' combined usage.

The engine keys the tenant level by ``(tenant, "")`` (``quota/managers.py``), so the rollup
per tenant is the client rollup's measures keyed the same way: every event of a tenant is
charged to that one key, and its throttle is the tenant level's (a ``tenant_*`` cause). The
tables have the client rollup's columns, so percentiles and recommendations are computed as
for any sharing key, plus ``members`` (distinct clients, principal and client id, seen in
the window):

- ``<rollup>/tenants/windows/``: per (quota type, tenant, window);
- ``<rollup>/tenants/entities/``: per (quota type, tenant), with rate percentiles.

``recommend`` proposes a ``[[quota]] tenant = ...`` entry per tenant from the p-th percentile
of its combined sustained rate; ``report`` shows the tenants' table.

A ``--quotas`` file with ``tenant.mapping.rules`` (its ``[broker]``) names the tenants itself,
as the replay does: each client's tenant is what those rules map it to, not the one its
events recorded ("what if these clients were one team"); the throttles counted are still the
recorded tenant level's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import pandas as pd

from quotagate.pipeline.quotas import CONFIG_KEYS, QUOTA_TYPES, candidate_tenants
from quotagate.quota import UNBOUNDED, QuotaFile, QuotaFileEntry, QuotaManagers, principal_user
from quotagate.quota.quota_config import TENANT
from quotagate.security.tenant_mapping import TenantMapper

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TENANTS_DIR: Final = "tenants"
TENANT_CAUSE_PREFIX: Final = "tenant_"


Frames = Callable[["DataFrame"], "DataFrame"]


def tenant_rollup(
    events: DataFrame,
    out: Path,
    window_s: int,
    window_num: int,
    quota_file: QuotaFile | None,
    *,
    measures: Frames,
    entities: Frames,
) -> int:
    """Write ``out/windows`` and ``out/entities`` for the usage cells (``rollup.usage_cells``)
    that name a tenant; returns the number of tenants (0: nothing written). ``measures`` and
    ``entities``: the client rollup's own (one row per cell and quota type charged;
    percentiles per key), passed in by the rollup, which calls this."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    mapper = candidate_tenants(quota_file) if quota_file is not None else None
    if mapper is not None:
        events = _with_candidate_tenants(events, mapper)
    tenanted = events.where(F.col("tenant") != "")
    names = [row.tenant for row in tenanted.select("tenant").distinct().collect()]
    if not names:
        return 0
    # The tenant level's key: the tenant as "user", its member (the client) kept aside in
    # the client column to count members; only the tenant level's throttles are its own.
    cause = F.col("throttle_cause")
    keyed = (
        tenanted.withColumn("client_id", F.concat_ws("\n", "principal", "client_id"))
        .withColumn("principal", F.col("tenant"))
        .withColumn(
            "throttle_cause",
            F.when(
                cause.startswith(TENANT_CAUSE_PREFIX),
                F.expr(f"substring(throttle_cause, {len(TENANT_CAUSE_PREFIX) + 1})"),
            ).otherwise(F.lit("")),
        )
    )
    span_ms = max(window_num - 1, 1) * window_s * 1000
    sustained = (
        Window.partitionBy("quota_type", "share_user")
        .orderBy("window_start_ms")
        .rangeBetween(-(span_ms - window_s * 1000), 0)
    )
    limits = events.sparkSession.createDataFrame(
        [(t, q, limit) for t in names for q, limit in _limits(quota_file, t).items()],
        "share_user string, quota_type string, quota_limit double",
    )
    windows = (
        measures(keyed)
        .groupBy(F.col("principal").alias("share_user"), "quota_type", "window_start_ms")
        .agg(
            F.sum("value").alias("value"),
            F.sum("requests").alias("requests"),
            F.sum("throttle_ms").cast("long").alias("throttle_ms"),
            F.sum("throttled_requests").cast("long").alias("throttled_requests"),
            F.countDistinct("client_id").alias("members"),
        )
        .join(F.broadcast(limits), ["share_user", "quota_type"], "left")
        .withColumn("share_client", F.lit(""))
        .withColumn("entity_user", F.col("share_user"))
        .withColumn("entity_client", F.lit(None).cast("string"))
        .withColumn("rate", F.col("value") / window_s)
        .withColumn("sustained_rate", F.sum("value").over(sustained) / (span_ms / 1000))
    )
    windows.write.mode("overwrite").parquet(str(out / "windows"))
    windows = events.sparkSession.read.parquet(str(out / "windows"))
    members = windows.groupBy("quota_type", "share_user").agg(F.max("members").alias("members"))
    summary = entities(windows.drop("members")).join(members, ["quota_type", "share_user"])
    summary.coalesce(1).write.mode("overwrite").parquet(str(out / "entities"))
    return len(names)


def _with_candidate_tenants(events: DataFrame, mapper: TenantMapper) -> DataFrame:
    """The events with the tenant the candidate's rules name (the gateway's mapper, asked on
    the driver once per distinct client) in place of the recorded one."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    pairs = events.select("principal", "client_id").distinct().collect()
    named = events.sparkSession.createDataFrame(
        [
            (r.principal, r.client_id, mapper.tenant(principal_user(r.principal), r.client_id))
            for r in pairs
        ],
        "principal string, client_id string, candidate_tenant string",
    )
    return (
        events.join(F.broadcast(named), ["principal", "client_id"], "left")
        .withColumn("tenant", F.coalesce(F.col("candidate_tenant"), F.lit("")))
        .drop("candidate_tenant")
    )


def _limits(quota_file: QuotaFile | None, tenant: str) -> dict[str, float | None]:
    """The candidate file's tenant quota per quota type (None: none applies)."""
    if quota_file is None:
        return dict.fromkeys(QUOTA_TYPES)
    tenants = QuotaManagers.from_quota_file(quota_file).tenants
    assert tenants is not None  # a bundle built by create() has its tenant level
    limits: dict[str, float | None] = {}
    for quota_type, manager in zip(QUOTA_TYPES, tenants.all(), strict=True):
        limit = manager.quota_limit(tenant, "")
        limits[quota_type] = None if limit >= UNBOUNDED else limit
    return limits


def tenant_rates(spark: SparkSession, rollup_dir: Path, p: float) -> pd.DataFrame:
    """Per (quota type, tenant): the p-th percentile of the combined sustained rate, its
    maximum, the members seen and the current limit; empty without tenants."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    path = rollup_dir / TENANTS_DIR / "windows"
    if not path.exists():
        return pd.DataFrame(columns=["quota_type", "tenant", "observed"])
    windows = spark.read.parquet(str(path))
    frame = cast(
        pd.DataFrame,
        windows.groupBy("quota_type", F.col("share_user").alias("tenant"))
        .agg(
            F.percentile("sustained_rate", p).alias("observed"),
            F.max("sustained_rate").alias("observed_max"),
            F.max("members").alias("members"),
            F.first("quota_limit").alias("current_limit"),
        )
        .toPandas(),
    )
    return frame.sort_values(["tenant", "quota_type"], ignore_index=True)


def tenant_entries(rates: pd.DataFrame) -> list[QuotaFileEntry]:
    """One ``tenant = ...`` entry per tenant, from ``rates`` with a ``recommended`` column."""
    configs: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rates.itertuples(index=False):
        configs[str(row.tenant)][CONFIG_KEYS[str(row.quota_type)]] = float(row.recommended)
    return [QuotaFileEntry({TENANT: name}, config) for name, config in sorted(configs.items())]
