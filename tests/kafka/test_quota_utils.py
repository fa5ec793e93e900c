"""Kafka's ``QuotaUtilsTest`` (server-common, ``org.apache.kafka.server.quota``) as vectors.

Each violation carries a fresh ``Rate`` metric with 1 s windows, whose window at the time of
the violation is (samples - 1) s; the throttle is ``round((O - T) / T * window)``.
"""

from __future__ import annotations

import pytest

from quotagate.quota import (
    CumulativeSum,
    MetricConfig,
    Quota,
    QuotaViolation,
    Rate,
    bounded_throttle_time,
    throttle_time,
)
from quotagate.quota.sensor import Metric

T0 = 1_700_000_000_000
SAMPLES = 10
MAX_THROTTLE_MS = 500


def _violation(observed: float, quota: float, samples: int) -> QuotaViolation:
    config = MetricConfig(samples=samples, time_window_ms=1000, quota=Quota(quota, True))
    return QuotaViolation(Metric("test-metric", Rate(), config), observed, quota)


def _throttle(observed: float, quota: float, samples: int) -> int:
    return throttle_time(_violation(observed, quota, samples), T0)


def _bounded(observed: float, quota: float, samples: int) -> int:
    return bounded_throttle_time(_violation(observed, quota, samples), MAX_THROTTLE_MS, T0)


def test_throttle_time_observed_rate_equals_quota() -> None:
    """QuotaUtilsTest.testThrottleTimeObservedRateEqualsQuota"""
    assert _throttle(16.5, 16.5, SAMPLES) == 0
    assert _throttle(16.5, 16.5, SAMPLES + 1) == 0


def test_throttle_time_observed_rate_below_quota() -> None:
    """QuotaUtilsTest.testThrottleTimeObservedRateBelowQuota"""
    assert _throttle(16.5, 20.4, SAMPLES) < 0
    assert _throttle(16.5, 20.4, SAMPLES + 1) < 0


def test_throttle_time_observed_rate_above_quota() -> None:
    """QuotaUtilsTest.testThrottleTimeObservedRateAboveQuota"""
    assert _throttle(100.0, 50.0, 3) == 2000


def test_bounded_throttle_time_observed_rate_equals_quota() -> None:
    """QuotaUtilsTest.testBoundedThrottleTimeObservedRateEqualsQuota"""
    assert _bounded(18.2, 18.2, SAMPLES) == 0
    assert _bounded(18.2, 18.2, SAMPLES + 1) == 0


def test_bounded_throttle_time_observed_rate_below_quota() -> None:
    """QuotaUtilsTest.testBoundedThrottleTimeObservedRateBelowQuota"""
    assert _bounded(16.5, 22.4, SAMPLES) < 0
    assert _bounded(16.5, 22.4, SAMPLES + 1) < 0


def test_bounded_throttle_time_observed_rate_above_quota_below_limit() -> None:
    """QuotaUtilsTest.testBoundedThrottleTimeObservedRateAboveQuotaBelowLimit"""
    assert _bounded(55.0, 50.0, 2) == 100


def test_bounded_throttle_time_observed_rate_above_quota_above_limit() -> None:
    """QuotaUtilsTest.testBoundedThrottleTimeObservedRateAboveQuotaAboveLimit"""
    assert _bounded(100.0, 50.0, SAMPLES) == MAX_THROTTLE_MS


# Kafka throws IllegalArgumentException for a metric that is not a Rate; the engine's
# equivalent refusal is a TypeError (the metric is of the wrong kind).
def test_throttle_time_throws_exception_if_provided_non_rate_metric() -> None:
    """QuotaUtilsTest.testThrottleTimeThrowsExceptionIfProvidedNonRateMetric"""
    metric = Metric("test-metric", CumulativeSum(), MetricConfig())
    with pytest.raises(TypeError):
        throttle_time(QuotaViolation(metric, 10.0, 20.0), T0)


def test_bounded_throttle_time_throws_exception_if_provided_non_rate_metric() -> None:
    """QuotaUtilsTest.testBoundedThrottleTimeThrowsExceptionIfProvidedNonRateMetric"""
    metric = Metric("test-metric", CumulativeSum(), MetricConfig())
    with pytest.raises(TypeError):
        bounded_throttle_time(QuotaViolation(metric, 10.0, 20.0), MAX_THROTTLE_MS, T0)
