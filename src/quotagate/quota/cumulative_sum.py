"""A running total that never forgets (Kafka's ``CumulativeSum``)."""

from __future__ import annotations

from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.stat import Stat


class CumulativeSum(Stat):
    __slots__ = ("total",)

    def __init__(self, initial: float = 0.0) -> None:
        self.total = initial

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.total += value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.total

    def clone(self) -> CumulativeSum:
        return CumulativeSum(self.total)
