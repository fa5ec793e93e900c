"""The KIP-599 token bucket (Kafka's ``TokenBucket`` stat)."""

from __future__ import annotations

from quotagate.quota.java import LONG_MAX
from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.stat import Stat


class TokenBucket(Stat):
    """Tokens refill at the quota rate up to a burst of ``samples * window_s * quota``.

    Kafka starts with no tokens at time 0 and refills on first use; on an epoch-ms clock that
    first refill fills the bucket, so a bucket effectively starts full. We keep Kafka's state
    exactly, which means callers must pass epoch milliseconds (a clock near zero would start
    the bucket nearly empty).
    """

    __slots__ = ("last_update_ms", "tokens")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_update_ms = 0

    def clone(self) -> TokenBucket:
        twin = TokenBucket()
        twin.tokens, twin.last_update_ms = self.tokens, self.last_update_ms
        return twin

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        if config.quota is None:
            return float(LONG_MAX)
        self._refill(config, now_ms)
        return self.tokens

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        if config.quota is None:
            return
        burst = self._refill(config, now_ms)
        # min() so that an un-record (negative value) can never overfill the bucket.
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, config: MetricConfig, now_ms: int) -> float:
        assert config.quota is not None
        quota = config.quota.bound
        burst = burst_of(config)
        # Kafka's order of operations, to the ulp: the elapsed time is converted to seconds
        # first ((quota * ms) / 1000 differs in a third of cases and flips strict decisions).
        self.tokens = min(burst, self.tokens + quota * ((now_ms - self.last_update_ms) / 1000.0))
        self.last_update_ms = now_ms
        return burst


def burst_of(config: MetricConfig) -> float:
    """Tokens a full bucket holds under ``config``'s quota."""
    assert config.quota is not None
    return config.samples * (config.time_window_ms / 1000.0) * config.quota.bound
