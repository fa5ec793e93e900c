"""Rates per second over a windowed stat (Kafka's ``Rate`` and ``SimpleRate``)."""

from __future__ import annotations

from quotagate.quota.java import java_div
from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.sampled_stat import SampledStat, WindowedSum
from quotagate.quota.stat import Stat


class Rate(Stat):
    """Sum over the window divided by the window's length in seconds.

    The window is padded to at least S-1 full windows (the "first window" adjustment): a
    burst on a fresh sensor is averaged as if the missing history were zeros, so a new
    client cannot be throttled for its very first request.
    """

    __slots__ = ("stat",)

    def __init__(self, stat: SampledStat | None = None) -> None:
        self.stat: SampledStat = stat if stat is not None else WindowedSum()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.stat.record(config, value, now_ms)

    def clone(self) -> Rate:
        return type(self)(self.stat.clone())

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        value = self.stat.measure(config, now_ms)
        # window_size() would purge again; at the same instant that changes nothing.
        oldest_start_ms = self.stat.oldest_start_ms(now_ms)
        return value / (self._window_from(oldest_start_ms, config, now_ms) / 1000.0)

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        self.stat.purge_obsolete_samples(config, now_ms)
        return self._window_from(self.stat.oldest_start_ms(now_ms), config, now_ms)

    def _window_from(self, oldest_start_ms: int, config: MetricConfig, now_ms: int) -> int:
        elapsed = now_ms - oldest_start_ms
        window_ms = config.time_window_ms
        full_windows = elapsed // window_ms if elapsed >= 0 else java_div(elapsed, window_ms)
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * window_ms
        return max(elapsed, 1)


class SimpleRate(Rate):
    """A rate without the S-1 padding, floored at one window (replication quotas use it)."""

    __slots__ = ()

    def _window_from(self, oldest_start_ms: int, config: MetricConfig, now_ms: int) -> int:
        return max(now_ms - oldest_start_ms, config.time_window_ms)
