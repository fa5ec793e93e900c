"""What every stat offers a sensor: record a value, measure at a time."""

from __future__ import annotations

from typing import Protocol

from quotagate.quota.metric_config import MetricConfig


class Stat(Protocol):
    def record(self, config: MetricConfig, value: float, now_ms: int) -> None: ...

    def measure(self, config: MetricConfig, now_ms: int) -> float: ...

    def clone(self) -> Stat:
        """An independent copy, for reading a value without a measurement's side effects."""
        ...
