"""What every stat offers a sensor: record a value, measure at a time (Kafka's
``MeasurableStat``).

A base class rather than a protocol: compiled, a sensor then calls its stats through a
method table instead of looking each method up by name on every record.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from quotagate.quota.metric_config import MetricConfig


@mypyc_attr(allow_interpreted_subclasses=True)  # stats are Kafka's extension point
class Stat:
    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        raise NotImplementedError

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        raise NotImplementedError

    def clone(self) -> Stat:
        """An independent copy, for reading a value without a measurement's side effects."""
        raise NotImplementedError
