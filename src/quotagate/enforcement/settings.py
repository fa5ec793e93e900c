"""The ``[quotas]`` and ``[usage]`` sections of the gateway config file.

Kafka's broker property names where Kafka has one::

    [quotas]
    "quota.window.num" = 11                  # produce, fetch and request quotas
    "quota.window.size.seconds" = 1
    "controller.quota.window.num" = 11       # controller mutations (KIP-599)
    "controller.quota.window.size.seconds" = 1
    "super.users" = ["User:admin"]           # may alter quotas and thresholds
    "num.partitions" = 3                     # CreateTopics with -1 partitions (else learned)
    "topic.bytes.in.mode" = "reject"         # or "throttle"
    "total.bytes.in.per.sec.threshold" = 10485760   # used until one is set in the store
    "tenant.mapping.rules" = "RULE:user:^(.*)-svc$/$1/"   # used until one is set in the store
    "quota.exempt.principals" = ["User:canary"]           # used until one is set in the store

    [usage]
    path = "usage"                           # Parquet root; relative to the working directory
    "roll.interval.seconds" = 300
    "roll.bytes" = 134217728
    "queue.size" = 200000
    sink = "parquet"                         # or "kafka", or ["parquet", "kafka"]
    topic = "quotagate-usage"                # sink = "kafka": the usage topic (usage/stream.py)
    partitions = 6                           # when the gateway creates the topic
    "bootstrap.servers" = "host:9092"        # another cluster (default: the upstream), with
    "security.protocol" = "SASL_SSL"         # [upstream]'s security keys, not inherited
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from quotagate.fleet.settings import USAGE_TRIMS, FleetSettings
from quotagate.gateway import (
    SECURITY_KEYS,
    ConfigError,
    GatewayConfig,
    KeySpec,
    UpstreamSecurity,
    UpstreamSecurityError,
    integer,
    parse_section,
    parse_upstream_security,
)
from quotagate.quota.principal_list import check_principals
from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper

QUOTAS_SECTION: Final = "quotas"
USAGE_SECTION: Final = "usage"
FLEET_SECTION: Final = "fleet"
PARQUET: Final = "parquet"
KAFKA: Final = "kafka"
REJECT: Final = "reject"
THROTTLE: Final = "throttle"


@dataclass(frozen=True, slots=True)
class UsageSettings:
    path: Path | None = None
    """None: no usage events are written."""
    roll_interval_s: float = 300.0
    roll_bytes: int = 128 * 1024 * 1024
    queue_size: int = 200_000
    sinks: frozenset[str] = frozenset({PARQUET})
    """Parquet files under ``path``, the Kafka usage topic, or both."""
    topic: str = "quotagate-usage"
    partitions: int = 6
    bootstrap_servers: str | None = None
    """The usage topic's cluster; None: the upstream."""
    security: UpstreamSecurity | None = None
    """With ``bootstrap_servers``: that cluster's security, from [upstream]'s keys in [usage]."""

    @property
    def to_kafka(self) -> bool:
        return KAFKA in self.sinks

    @property
    def to_files(self) -> bool:
        return PARQUET in self.sinks and self.path is not None


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    window_num: int = 11
    window_size_s: int = 1
    controller_window_num: int = 11
    controller_window_size_s: int = 1
    super_users: frozenset[str] = frozenset()
    num_partitions: int | None = None
    topic_bytes_in_mode: str = REJECT
    total_bytes_in_threshold: float | None = None
    tenant_mapping_rules: str | None = None
    exempt_principals: frozenset[str] | None = None
    usage: UsageSettings = field(default_factory=UsageSettings)

    @classmethod
    def from_config(cls, config: GatewayConfig) -> QuotaSettings:
        return cls.parse(config.extra.get(QUOTAS_SECTION, {}), config.extra.get(USAGE_SECTION))

    @classmethod
    def parse(
        cls, quotas: Mapping[str, Any], usage: Mapping[str, Any] | None = None
    ) -> QuotaSettings:
        values = parse_section(QUOTAS_SECTION, dict(quotas), _QUOTA_KEYS)
        return cls(usage=_usage_settings(dict(usage or {})), **values)


def _usage_settings(section: dict[str, Any]) -> UsageSettings:
    security_keys = {key: section.pop(key) for key in list(section) if key in SECURITY_KEYS}
    values = parse_section(USAGE_SECTION, section, _USAGE_KEYS)
    usage = UsageSettings(**values)
    if security_keys and usage.bootstrap_servers is None:
        raise ConfigError(
            f"[usage] {', '.join(sorted(security_keys))}: security keys in [usage] are for "
            'another cluster: set [usage] "bootstrap.servers" too, or move them to [upstream]'
        )
    if usage.bootstrap_servers is not None:
        try:
            security = parse_upstream_security(security_keys)
        except UpstreamSecurityError as exc:
            raise ConfigError(f"[usage]: {str(exc).replace('[upstream]', '[usage]')}") from None
        usage = dataclasses.replace(usage, security=security)
    if PARQUET in usage.sinks and usage.path is None and "sink" in section:
        raise ConfigError(
            '[usage] sink names "parquet" but no path is set: add path = "usage" (the '
            'directory the Parquet files go to), or set sink = "kafka"'
        )
    return usage


def fleet_settings(config: GatewayConfig) -> FleetSettings:
    """The ``[fleet]`` section (fleet.settings documents it); the usage exchange is on by
    default exactly when the store is the upstream's, which is what makes a fleet."""
    values = parse_section(FLEET_SECTION, dict(config.extra.get(FLEET_SECTION, {})), _FLEET_KEYS)
    values.setdefault("exchange_enabled", config.store_backend == "kafka")
    return FleetSettings(**values)


def configure(config: GatewayConfig) -> GatewayConfig:
    """The gateway config with this plug-in's sections checked and the store's topic named
    after the fleet (``_quotagate.<fleet id>.config``) unless ``[store] topic`` names one: the
    workers and instances of one fleet share one configuration."""
    QuotaSettings.from_config(config)
    fleet = fleet_settings(config)
    if config.store_topic:
        return config
    return dataclasses.replace(config, store_topic=f"_quotagate.{fleet.fleet_id}.config")


def _whole_seconds(low_ms: int, high_ms: int) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        ms = integer(low_ms, high_ms)(key, value)
        if ms % 1000:
            raise ConfigError(f"{key} = {value!r} must be a whole number of seconds, e.g. 60000")
        return ms

    return parse


def _positive(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{key} = {value!r} must be a number > 0")
    return float(value)


def _principals(key: str, value: Any) -> frozenset[str]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(";") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and ":" in v for v in value):
        raise ConfigError(f'{key} must list principals, e.g. {key} = ["User:admin"]')
    return frozenset(value)


def _mode(key: str, value: Any) -> str:
    if value not in (REJECT, THROTTLE):
        raise ConfigError(f"{key} = {value!r} must be {REJECT!r} or {THROTTLE!r}")
    return str(value)


def _path(key: str, value: Any) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f'{key} = {value!r} must be a directory, e.g. {key} = "usage"')
    return Path(value)


def _tenant_rules(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f'{key} must be a string, e.g. {key} = "RULE:user:^(.*)-svc$/$1/"')
    try:
        TenantMapper.from_rules(value)
    except InvalidRuleError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return value


def _exempt_principals(key: str, value: Any) -> frozenset[str]:
    # The rule the store's value and the quota file's list are checked by, too.
    if isinstance(value, str):
        value = [part.strip() for part in value.split(";") if part.strip()]
    if not isinstance(value, list):
        raise ConfigError(f'{key} must list principals, e.g. {key} = ["User:canary"]')
    try:
        return frozenset(check_principals(value))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


_QUOTA_KEYS: Final[dict[str, KeySpec]] = {
    "quota.window.num": ("window_num", integer(1)),
    "quota.window.size.seconds": ("window_size_s", integer(1)),
    "controller.quota.window.num": ("controller_window_num", integer(1)),
    "controller.quota.window.size.seconds": ("controller_window_size_s", integer(1)),
    "super.users": ("super_users", _principals),
    "num.partitions": ("num_partitions", integer(1)),
    "topic.bytes.in.mode": ("topic_bytes_in_mode", _mode),
    "total.bytes.in.per.sec.threshold": ("total_bytes_in_threshold", _positive),
    "tenant.mapping.rules": ("tenant_mapping_rules", _tenant_rules),
    "quota.exempt.principals": ("exempt_principals", _exempt_principals),
}


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key} = {value!r} must be true or false")
    return value


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value or not _TOPIC_CHARS.issuperset(value):
        raise ConfigError(
            f"{key} = {value!r} must be a non-empty name of letters, digits, '.', '_' and '-'"
        )
    return value


def _replication_factor(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (value == -1 or value >= 1):
        raise ConfigError(f"{key} = {value!r} must be -1 (the upstream's default) or >= 1")
    return int(value)


def _usage_trim(key: str, value: Any) -> str:
    if value not in USAGE_TRIMS:
        raise ConfigError(
            f'{key} = {value!r} must be "roll" (a usage topic per period, on any upstream) or '
            '"delete-records" (one topic trimmed with DeleteRecords, which Kafka answers)'
        )
    return str(value)


_TOPIC_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_FLEET_KEYS: Final[dict[str, KeySpec]] = {
    "id": ("fleet_id", _name),
    "exchange.enabled": ("exchange_enabled", _bool),
    "exchange.interval.ms": ("exchange_interval_ms", integer(10, 60_000)),
    "exchange.local.interval.ms": ("exchange_local_interval_ms", integer(5, 60_000)),
    "usage.topic": ("usage_topic", _name),
    "usage.retention.ms": ("usage_retention_ms", integer(60_000)),
    "usage.roll.ms": ("usage_roll_ms", _whole_seconds(10_000, 3_600_000)),
    "usage.trim": ("usage_trim", _usage_trim),
    "replication.factor": ("replication_factor", _replication_factor),
}


def _sinks(key: str, value: Any) -> frozenset[str]:
    names = [value] if isinstance(value, str) else value
    if (
        not isinstance(names, list)
        or not names
        or not all(name in (PARQUET, KAFKA) for name in names)
    ):
        raise ConfigError(
            f'{key} = {value!r} must be "{PARQUET}", "{KAFKA}" or both, e.g. '
            f'{key} = ["{PARQUET}", "{KAFKA}"]'
        )
    return frozenset(names)


def _bootstrap(key: str, value: Any) -> str:
    parts = value.split(",") if isinstance(value, str) else []
    if not parts or not all(p.strip().rpartition(":")[2].isdigit() for p in parts):
        raise ConfigError(f'{key} = {value!r} must list host:port pairs, e.g. {key} = "kafka:9092"')
    return ",".join(p.strip() for p in parts)


_USAGE_KEYS: Final[dict[str, KeySpec]] = {
    "path": ("path", _path),
    "sink": ("sinks", _sinks),
    "topic": ("topic", _name),
    "partitions": ("partitions", integer(1, 10_000)),
    "bootstrap.servers": ("bootstrap_servers", _bootstrap),
    "roll.interval.seconds": ("roll_interval_s", _positive),
    "roll.bytes": ("roll_bytes", integer(1)),
    "queue.size": ("queue_size", integer(1)),
}
