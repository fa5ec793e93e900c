"""A metric's quota and sampling window (Kafka's ``Quota`` and ``MetricConfig``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mypy_extensions import i64

from quotagate.quota.java import LONG_MAX

DEFAULT_SAMPLES: Final = 2
DEFAULT_WINDOW_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class Quota:
    """A bound on a measured value; ``upper`` quotas are violated only when strictly exceeded."""

    bound: float
    upper: bool = True

    @classmethod
    def upper_bound(cls, bound: float) -> Quota:
        return cls(bound, True)

    @classmethod
    def lower_bound(cls, bound: float) -> Quota:
        return cls(bound, False)

    def acceptable(self, value: float) -> bool:
        return value <= self.bound if self.upper else value >= self.bound


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """How a stat samples time: ``samples`` windows of ``time_window_ms``, and an optional quota.

    Frozen so that a quota manager swaps a metric's whole config on a quota change while the
    stat keeps its history, as Kafka does.
    """

    samples: int = DEFAULT_SAMPLES
    time_window_ms: int = DEFAULT_WINDOW_MS
    quota: Quota | None = None
    # A Java long: compiled, a machine integer (LONG_MAX as a Python int is boxed, and the
    # record's "is the sample full?" compared against it through the object protocol).
    event_window: i64 = LONG_MAX

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError("The number of samples must be at least 1.")
        if self.time_window_ms < 1:
            raise ValueError("The sample window must be at least 1 ms.")

    def with_quota(self, quota: Quota | None) -> MetricConfig:
        return MetricConfig(self.samples, self.time_window_ms, quota, self.event_window)
