"""Spec §9.2 (quotas on a sensor, token bucket) and §9.3 (throttle-time formulas)."""

from __future__ import annotations

import pytest

from quotagate.quota import (
    MetricConfig,
    Quota,
    QuotaViolation,
    Rate,
    Sensor,
    TokenBucket,
    WindowedSum,
    bounded_throttle_time,
    throttle_time,
)
from quotagate.quota.sensor import Metric

T0 = 1_700_000_000_000


def test_strict_record_on_a_rate_rejects_while_already_violated() -> None:
    sensor = Sensor("strict")
    rate = Rate()
    config = MetricConfig(samples=11, time_window_ms=1000, quota=Quota.upper_bound(2))
    sensor.add("rate", rate, config)
    sensor.record_strict(30, T0)
    assert rate.measure(config, T0) == pytest.approx(3.0)
    assert rate.measure(config, T0 + 5000) == pytest.approx(3.0)
    with pytest.raises(QuotaViolation) as violation:
        sensor.record_strict(30, T0 + 5000)
    assert violation.value.value == pytest.approx(3.0)
    assert violation.value.bound == 2
    assert "violated quota. Actual: 3.0" in str(violation.value)


def test_strict_record_on_a_token_bucket() -> None:
    sensor = Sensor("strict")
    bucket = TokenBucket()
    config = MetricConfig(samples=10, time_window_ms=1000, quota=Quota.upper_bound(2))
    sensor.add("tokens", bucket, config)
    sensor.record_strict(30, T0)
    assert bucket.measure(config, T0) == -10
    assert bucket.measure(config, T0 + 5000) == 0
    sensor.record_strict(30, T0 + 5000)  # zero tokens is not a violation
    assert bucket.measure(config, T0 + 5000) == -30


def _bucket_config() -> MetricConfig:
    return MetricConfig(samples=10, time_window_ms=2000, quota=Quota.upper_bound(5))


def test_token_bucket_record() -> None:
    config, bucket = _bucket_config(), TokenBucket()
    assert bucket.measure(config, T0) == 100
    bucket.record(config, 60, T0)
    assert bucket.measure(config, T0) == 40
    bucket.record(config, 5, T0 + 2000)
    assert bucket.measure(config, T0 + 2000) == 45
    bucket.record(config, 60, T0 + 4000)
    assert bucket.measure(config, T0 + 4000) == -5


def test_token_bucket_unrecord_never_overfills() -> None:
    config, bucket = _bucket_config(), TokenBucket()
    assert bucket.measure(config, T0) == 100
    bucket.record(config, -60, T0)
    assert bucket.measure(config, T0) == 100
    bucket.record(config, 60, T0 + 2000)
    assert bucket.measure(config, T0 + 2000) == 40
    bucket.record(config, -60, T0 + 4000)
    assert bucket.measure(config, T0 + 4000) == 100


def test_token_bucket_refills_in_kafkas_order_of_operations() -> None:
    # Kafka's TokenBucket refills quota * (elapsed ms / 1000.0). With quota 10 and 11 ms the
    # other order, (quota * 11) / 1000, lands one ulp higher (0.11 against 0.10999999999999999).
    config = MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(10.0))
    bucket = TokenBucket()
    bucket.tokens, bucket.last_update_ms = 0.0, T0
    assert bucket.measure(config, T0 + 11) == 10.0 * (11 / 1000.0)
    assert bucket.tokens != 10.0 * 11 / 1000.0


def test_token_bucket_on_a_clock_near_zero_starts_almost_empty() -> None:
    assert TokenBucket().measure(_bucket_config(), 1000) == 5


def test_token_bucket_without_quota_measures_long_max() -> None:
    assert TokenBucket().measure(MetricConfig(), T0) == float(2**63 - 1)


def _violation(observed: float, quota: float, samples: int) -> QuotaViolation:
    config = MetricConfig(samples=samples, time_window_ms=1000, quota=Quota.upper_bound(quota))
    metric = Metric("rate", Rate(), config)
    return QuotaViolation(metric, observed, quota)


@pytest.mark.parametrize(
    ("observed", "quota", "samples", "expected"),
    [
        (16.5, 16.5, 10, 0),
        (16.5, 16.5, 11, 0),
        (16.5, 20.4, 10, -1721),
        (100, 50, 3, 2000),
        (100, 50, 10, 9000),
    ],
)
def test_throttle_time(observed: float, quota: float, samples: int, expected: int) -> None:
    assert throttle_time(_violation(observed, quota, samples), T0) == expected


@pytest.mark.parametrize(
    ("observed", "quota", "samples", "max_ms", "expected"),
    [(16.5, 22.4, 10, 500, -2371), (55, 50, 2, 500, 100), (100, 50, 10, 500, 500)],
)
def test_bounded_throttle_time(
    observed: float, quota: float, samples: int, max_ms: int, expected: int
) -> None:
    violation = _violation(observed, quota, samples)
    assert bounded_throttle_time(violation, max_ms, T0) == expected


def test_throttle_time_needs_a_rate() -> None:
    metric = Metric("sum", WindowedSum(), MetricConfig(quota=Quota.upper_bound(1)))
    with pytest.raises(TypeError):
        throttle_time(QuotaViolation(metric, 2, 1), T0)
    with pytest.raises(TypeError):
        bounded_throttle_time(QuotaViolation(metric, 2, 1), 10, T0)


def test_peek_reads_what_measure_would_without_its_side_effects() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(10))
    stat = Rate()
    rate = Metric("rate", stat, config)
    stat.record(config, 50, T0)
    stat.record(config, 5, T0 + 1500)
    later = T0 + 3000  # the first sample is obsolete here: measuring resets it
    before = (list(stat.stat.starts), list(stat.stat.values))
    peeked = rate.peek(later)
    assert (list(stat.stat.starts), list(stat.stat.values)) == before
    assert peeked == rate.measure(later) == 5 / 1.5
    assert (list(stat.stat.starts), list(stat.stat.values)) != before


def test_peek_does_not_refill_a_token_bucket() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(10))
    bucket = TokenBucket()
    tokens = Metric("tokens", bucket, config)
    bucket.record(config, 25, T0)  # starts full at 20: -5 left
    assert tokens.peek(T0 + 1000) == 5
    assert (bucket.tokens, bucket.last_update_ms) == (-5, T0)
    assert tokens.measure(T0 + 1000) == 5


def test_adding_a_metric_name_twice_keeps_the_first() -> None:
    # Kafka's SensorTest.testIdempotentAdd: a second add of the same name changes nothing.
    sensor = Sensor("s")
    first = sensor.add("tokens", TokenBucket(), _bucket_config())
    again = sensor.add("tokens", TokenBucket(), _bucket_config())
    assert again is first
    assert len(sensor.metrics) == 1
