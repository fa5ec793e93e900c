"""Sensors: named groups of metrics recorded together, with quota checks.

A sensor records a value into each of its stats first and checks quotas afterwards, so a
value that breaks a quota stays recorded (that is how Kafka computes how long to throttle).
The strict pattern (check, then record without checking) is what KIP-599 uses to reject a
request while the quota is *already* violated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.stat import Stat
from quotagate.quota.token_bucket import TokenBucket


@dataclass(slots=True)
class Metric:
    """A named stat with its own config; quota managers swap ``config`` on quota changes."""

    name: str
    stat: Stat
    config: MetricConfig
    # Token buckets are violated below zero tokens, not above their bound.
    is_token_bucket: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_token_bucket = isinstance(self.stat, TokenBucket)

    def measure(self, now_ms: int) -> float:
        return self.stat.measure(self.config, now_ms)

    def peek(self, now_ms: int) -> float:
        """What ``measure`` would return, leaving the stat untouched.

        Kafka's measurements purge samples and refill buckets, so in Kafka a JMX read can
        shift a later throttle. Exporters use this instead, so that watching the gateway
        never changes its decisions and a replay of its usage events sees the same state.
        """
        return self.stat.clone().measure(self.config, now_ms)


class QuotaViolation(Exception):  # noqa: N818 - Kafka's name for the same thing
    """A metric broke its quota: carries the metric, the measured value and the bound."""

    def __init__(self, metric: Metric, value: float, bound: float) -> None:
        super().__init__(metric, value, bound)
        self.metric = metric
        self.value = value
        self.bound = bound

    def __str__(self) -> str:
        return f"'{self.metric.name}' violated quota. Actual: {self.value}, Threshold: {self.bound}"


class Sensor:
    __slots__ = ("last_record_ms", "metrics", "name", "recorded")

    def __init__(self, name: str, created_ms: int = 0) -> None:
        self.name = name
        self.metrics: list[Metric] = []
        # As Kafka's: a sensor's idle time (its expiry) counts from its creation.
        self.last_record_ms = created_ms
        self.recorded = 0.0
        """Everything this process recorded, ever: what a fleet tells its peers it used."""

    def add(self, name: str, stat: Stat, config: MetricConfig) -> Metric:
        """Add a metric; as Kafka's ``Sensor.add``, a name already present keeps its metric."""
        for metric in self.metrics:
            if metric.name == name:
                return metric
        metric = Metric(name, stat, config)
        self.metrics.append(metric)
        return metric

    def metric(self, name: str) -> Metric:
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(name)

    def record(self, value: float, now_ms: int, check_quotas: bool = True) -> None:
        self.last_record_ms = now_ms
        self.recorded += value
        for metric in self.metrics:
            metric.stat.record(metric.config, value, now_ms)
        if check_quotas:
            self.check_quotas(now_ms)

    def record_remote(self, value: float, now_ms: int) -> None:
        """Record what another worker of the fleet used: it counts against every quota here,
        but it is not this process's own usage (``recorded``) and is never checked."""
        self.last_record_ms = now_ms
        for metric in self.metrics:
            metric.stat.record(metric.config, value, now_ms)

    def check_quotas(self, now_ms: int) -> None:
        """Raise ``QuotaViolation`` for the first metric (in insertion order) over its quota."""
        for metric in self.metrics:
            quota = metric.config.quota
            if quota is None:
                continue
            value = metric.stat.measure(metric.config, now_ms)
            if metric.is_token_bucket:
                if value < 0:
                    raise QuotaViolation(metric, value, quota.bound)
            elif not (value <= quota.bound if quota.upper else value >= quota.bound):
                raise QuotaViolation(metric, value, quota.bound)

    def record_strict(self, value: float, now_ms: int) -> None:
        """Refuse the value if a quota is already broken; otherwise record it whole."""
        self.check_quotas(now_ms)
        self.record(value, now_ms, check_quotas=False)

    def has_expired(self, now_ms: int, expiration_s: float) -> bool:
        return now_ms - self.last_record_ms > expiration_s * 1000
