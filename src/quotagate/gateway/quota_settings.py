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

    [usage]
    path = "usage"                           # Parquet root; relative to the working directory
    "roll.interval.seconds" = 300
    "roll.bytes" = 134217728
    "queue.size" = 200000
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from quotagate.gateway.config import ConfigError, GatewayConfig, register_section

QUOTAS_SECTION: Final = "quotas"
USAGE_SECTION: Final = "usage"
REJECT: Final = "reject"
THROTTLE: Final = "throttle"

register_section(QUOTAS_SECTION)
register_section(USAGE_SECTION)


@dataclass(frozen=True, slots=True)
class UsageSettings:
    path: Path | None = None
    """None: no usage events are written."""
    roll_interval_s: float = 300.0
    roll_bytes: int = 128 * 1024 * 1024
    queue_size: int = 200_000


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
    usage: UsageSettings = field(default_factory=UsageSettings)

    @classmethod
    def from_config(cls, config: GatewayConfig) -> QuotaSettings:
        return cls.parse(config.extra.get(QUOTAS_SECTION, {}), config.extra.get(USAGE_SECTION))

    @classmethod
    def parse(
        cls, quotas: Mapping[str, Any], usage: Mapping[str, Any] | None = None
    ) -> QuotaSettings:
        flat = _flatten(quotas)
        values: dict[str, Any] = {}
        for key, value in flat.items():
            spec = _QUOTA_KEYS.get(key)
            if spec is None:
                raise ConfigError(
                    f"unknown key {key!r} in [quotas]; known keys: {', '.join(_QUOTA_KEYS)}"
                )
            name, parser = spec
            values[name] = parser(key, value)
        usage_settings = UsageSettings()
        if usage is not None:
            usage_values: dict[str, Any] = {}
            for key, value in _flatten(usage).items():
                spec = _USAGE_KEYS.get(key)
                if spec is None:
                    raise ConfigError(
                        f"unknown key {key!r} in [usage]; known keys: {', '.join(_USAGE_KEYS)}"
                    )
                name, parser = spec
                usage_values[name] = parser(key, value)
            usage_settings = UsageSettings(**usage_values)
        return cls(usage=usage_settings, **values)


def _int(minimum: int) -> Any:
    def parse(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{key} = {value!r} must be an integer >= {minimum}")
        return int(value)

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


_QUOTA_KEYS: Final[dict[str, tuple[str, Any]]] = {
    "quota.window.num": ("window_num", _int(1)),
    "quota.window.size.seconds": ("window_size_s", _int(1)),
    "controller.quota.window.num": ("controller_window_num", _int(1)),
    "controller.quota.window.size.seconds": ("controller_window_size_s", _int(1)),
    "super.users": ("super_users", _principals),
    "num.partitions": ("num_partitions", _int(1)),
    "topic.bytes.in.mode": ("topic_bytes_in_mode", _mode),
    "total.bytes.in.per.sec.threshold": ("total_bytes_in_threshold", _positive),
}
_USAGE_KEYS: Final[dict[str, tuple[str, Any]]] = {
    "path": ("path", _path),
    "roll.interval.seconds": ("roll_interval_s", _positive),
    "roll.bytes": ("roll_bytes", _int(1)),
    "queue.size": ("queue_size", _int(1)),
}


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
