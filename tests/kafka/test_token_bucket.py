"""Kafka's ``TokenBucketTest`` (clients, ``org.apache.kafka.common.metrics``) as vectors.

Quota 5/s, 10 samples of 2 s: a burst of 100 tokens. Kafka's clock is epoch milliseconds,
so the first refill (from ``lastUpdateMs = 0``) fills the bucket.
"""

from __future__ import annotations

from quotagate.quota import MetricConfig, Quota, TokenBucket

T0 = 1_700_000_000_000
CONFIG = MetricConfig(samples=10, time_window_ms=2000, quota=Quota.upper_bound(5))


def test_record() -> None:
    """TokenBucketTest.testRecord"""
    bucket = TokenBucket()
    assert bucket.measure(CONFIG, T0) == 100
    bucket.record(CONFIG, 60, T0)
    assert bucket.measure(CONFIG, T0) == 40
    bucket.record(CONFIG, 5, T0 + 2000)
    assert bucket.measure(CONFIG, T0 + 2000) == 45
    bucket.record(CONFIG, 60, T0 + 4000)
    assert bucket.measure(CONFIG, T0 + 4000) == -5


def test_unrecord() -> None:
    """TokenBucketTest.testUnrecord: a negative record never fills beyond the burst."""
    bucket = TokenBucket()
    assert bucket.measure(CONFIG, T0) == 100
    bucket.record(CONFIG, -60, T0)
    assert bucket.measure(CONFIG, T0) == 100
    bucket.record(CONFIG, 60, T0 + 2000)
    assert bucket.measure(CONFIG, T0 + 2000) == 40
    bucket.record(CONFIG, -60, T0 + 4000)
    assert bucket.measure(CONFIG, T0 + 4000) == 100
