"""``recommend``: quota values from observed usage, written as a quota file.

For every sharing key of the rollup: the p-th percentile of its sustained windowed rate
times a headroom factor, per quota type. For controller mutations also the bucket depth
(``controller.quota.window.num``, a gateway-wide setting) that admits the observed storms
at the recommended rate; entities whose storms would need more than ``max_window_num``
get a higher rate instead. Output: ``quotagate.quota.quota_file`` format, so it applies
straight to the gateway. Tenants (issue 25) get a ``tenant = ...`` entry each, from the
percentile of their members' combined sustained rate (``pipeline.tenants``). The rollup's
``--quotas`` ``[broker]`` settings (``tenant.mapping.rules``, ``quota.exempt.principals``)
are carried into the file as they were: the tenants recommended for are the ones those rules
name. A rollup without them gives a file without ``[broker]``, which ``quotas apply`` reads
as "leave the live settings alone". recommend reads no live store.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.quotas import CONFIG_KEYS
from quotagate.pipeline.recommend.burst import (
    KAFKA_DEFAULT_WINDOW_NUM,
    deepest_backlog,
    window_num_for,
)
from quotagate.pipeline.tables import read_json, write_json
from quotagate.pipeline.tenants import tenant_entries, tenant_rates
from quotagate.quota import QuotaFile, QuotaFileEntry, dump_quota_file
from quotagate.quota.managers import CONTROLLER_WINDOW_NUM, CONTROLLER_WINDOW_SIZE
from quotagate.quota.quota_file import QuotaFileError, read_broker_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Byte rates are LONG configs in Kafka; request_percentage and mutation rates are DOUBLE.
_INTEGRAL = {"produce", "fetch"}
_MINIMUM = {"produce": 1024.0, "fetch": 1024.0, "request": 0.01, "controller_mutation": 0.1}


@dataclass(frozen=True, slots=True)
class RecommendOptions:
    percentile: float = 99.0
    headroom: float = 1.5
    max_window_num: int = 60
    include_default: bool = True


def recommend(
    spark: SparkSession, rollup_dir: str | Path, out_file: str | Path, options: RecommendOptions
) -> dict[str, Any]:
    """Write the quota file and a ``recommendations.parquet`` table beside it."""
    if not 0 < options.percentile <= 100:
        raise PipelineError("--percentile must be in (0, 100]")
    if options.headroom <= 0:
        raise PipelineError("--headroom must be positive")
    rollup_dir = Path(rollup_dir)
    summary = read_json(rollup_dir / "summary.json")
    rates = _percentile_rates(spark, rollup_dir, options.percentile / 100.0)
    rates["recommended"] = [
        _rounded(t, max(v * options.headroom, _MINIMUM[t]))
        for t, v in zip(rates["quota_type"], rates["observed"], strict=True)
    ]
    window_size = int(summary.get("window_seconds", 1))
    window_num = _size_mutation_buckets(spark, rollup_dir, rates, options, window_size)
    quota_file = _quota_file(rates, options, window_num, window_size)
    tenants = tenant_rates(spark, rollup_dir, options.percentile / 100.0)
    tenants["recommended"] = [
        _rounded(t, max(v * options.headroom, _MINIMUM[t]))
        for t, v in zip(tenants["quota_type"], tenants["observed"], strict=True)
    ]
    quota_file.entries.extend(tenant_entries(tenants))
    # The rollup's --quotas [broker] settings: its tenants (and so these tenant entries) are
    # the ones those rules name; without them the file leaves the live settings alone.
    try:
        broker = read_broker_table(summary.get("broker", {}))
    except QuotaFileError as exc:
        raise PipelineError(f"{rollup_dir / 'summary.json'}: {exc}") from None
    quota_file.tenant_mapping_rules, quota_file.exempt_principals = broker
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(dump_quota_file(quota_file), encoding="utf-8")
    rates.to_parquet(out_file.with_name(out_file.stem + ".recommendations.parquet"))
    if not tenants.empty:
        tenants.to_parquet(out_file.with_name(out_file.stem + ".tenants.parquet"))
    result = {
        "entities": len(quota_file.entries),
        "tenants": int(tenants["tenant"].nunique()) if not tenants.empty else 0,
        "percentile": options.percentile,
        "headroom": options.headroom,
        CONTROLLER_WINDOW_NUM: window_num,
        "file": str(out_file),
    }
    write_json(out_file.with_name(out_file.stem + ".summary.json"), result)
    return result


def _percentile_rates(spark: SparkSession, rollup_dir: Path, p: float) -> pd.DataFrame:
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    windows = spark.read.parquet(str(rollup_dir / "windows"))
    frame = cast(
        pd.DataFrame,
        windows.groupBy("quota_type", "share_user", "share_client", "entity_user", "entity_client")
        .agg(
            F.percentile("sustained_rate", p).alias("observed"),
            F.max("sustained_rate").alias("observed_max"),
            F.first("quota_limit").alias("current_limit"),
        )
        .toPandas(),
    )
    if frame.empty:
        raise PipelineError(f"{rollup_dir} has no usage windows to recommend from")
    return frame.sort_values(["quota_type", "share_user", "share_client"], ignore_index=True)


def _size_mutation_buckets(
    spark: SparkSession,
    rollup_dir: Path,
    rates: pd.DataFrame,
    options: RecommendOptions,
    window_size: int,
) -> int:
    """Pick ``controller.quota.window.num`` and raise rates whose storms do not fit."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    storms = cast(
        pd.DataFrame,
        spark.read.parquet(str(rollup_dir / "windows"))
        .where((F.col("quota_type") == "controller_mutation") & (F.col("value") > 0))
        .select("share_user", "share_client", "window_start_ms", "value")
        .toPandas(),
    )
    rates["burst"] = 0.0
    rates["needed_window_num"] = 0
    needed: dict[int, int] = {}
    for (user, client), group in storms.groupby(["share_user", "share_client"]):
        row = rates.index[
            (rates["quota_type"] == "controller_mutation")
            & (rates["share_user"] == user)
            & (rates["share_client"] == client)
        ]
        if row.empty:
            continue
        index = int(row[0])
        ordered = group.sort_values("window_start_ms")
        rate = float(rates.at[index, "recommended"])
        backlog = deepest_backlog(
            (ordered["window_start_ms"] / 1000.0).tolist(), ordered["value"].tolist(), rate
        )
        rates.at[index, "burst"] = backlog
        needed[index] = window_num_for(backlog, rate, window_size)
    window_num = max([KAFKA_DEFAULT_WINDOW_NUM, *needed.values()])
    window_num = min(window_num, options.max_window_num)
    for index, want in needed.items():
        rates.at[index, "needed_window_num"] = want
        if want > window_num:
            # The bucket cannot get deeper: a faster refill must absorb the storm instead.
            burst = float(rates.at[index, "burst"])
            rates.at[index, "recommended"] = _rounded(
                "controller_mutation", burst / (window_num * window_size)
            )
    return window_num


def _quota_file(
    rates: pd.DataFrame, options: RecommendOptions, window_num: int, window_size: int
) -> QuotaFile:
    configs: dict[tuple[str | None, str | None], dict[str, float]] = defaultdict(dict)
    for row in rates.itertuples(index=False):
        entity = (_name(row.entity_user), _name(row.entity_client))
        if entity == (None, None):
            continue
        configs[entity][CONFIG_KEYS[str(row.quota_type)]] = float(row.recommended)
    entries = [
        QuotaFileEntry(_entity(user, client), config)
        for (user, client), config in sorted(configs.items(), key=lambda kv: str(kv[0]))
    ]
    if options.include_default and entries:
        entries.append(_default_entry(rates))
    gateway: dict[str, int | float] = {
        CONTROLLER_WINDOW_NUM: window_num,
        CONTROLLER_WINDOW_SIZE: window_size,
    }
    return QuotaFile(entries, gateway)


def _default_entry(rates: pd.DataFrame) -> QuotaFileEntry:
    """A default entity at the rollup's level, at the median recommendation, so clients
    that were not observed still get a quota of the same shape."""
    users = rates["entity_user"].notna().any()
    clients = rates["entity_client"].notna().any()
    entity: dict[str, str | None] = {}
    if users:
        entity["user"] = None
    if clients or not users:
        entity["client-id"] = None
    config = {
        CONFIG_KEYS[str(t)]: _rounded(str(t), float(group["recommended"].median()))
        for t, group in rates.groupby("quota_type")
    }
    return QuotaFileEntry(entity, config)


def _entity(user: str | None, client: str | None) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    if user is not None:
        entity["user"] = user
    if client is not None:
        entity["client-id"] = client
    return entity


def _name(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _rounded(quota_type: str, value: float) -> float:
    """Round up: a recommendation must never be below what was asked for."""
    if quota_type in _INTEGRAL:
        return float(math.ceil(value))
    return math.ceil(value * 100.0) / 100.0
