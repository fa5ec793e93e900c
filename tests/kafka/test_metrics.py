"""Kafka's ``MetricsTest`` (clients, ``org.apache.kafka.common.metrics``), its Rate, SampledStat,
quota and sensor-expiry parts, as vectors.

Kafka's ``Meter`` is a Rate plus a cumulative total; the engine has both parts and no Meter, so
the vectors measure the parts. Registry, JMX, percentiles and hierarchy tests are not ported
(see docs/engine.md, "Kafka's tests as vectors").
"""

from __future__ import annotations

import math

import pytest

from quotagate.quota import (
    Avg,
    CumulativeSum,
    Max,
    MetricConfig,
    Min,
    Quota,
    QuotaViolation,
    Rate,
    Sensor,
    SimpleRate,
    WindowedCount,
    WindowedSum,
)

T0 = 1_700_000_000_000
EPS = 0.000001


def test_simple_stats() -> None:
    """MetricsTest.testSimpleStats: 0..9 recorded at one instant, default config (2 x 30 s)."""
    config = MetricConfig()
    sensor = Sensor("test.sensor")
    avg = sensor.add("test.avg", Avg(), config)
    maximum = sensor.add("test.max", Max(), config)
    minimum = sensor.add("test.min", Min(), config)
    rate = sensor.add("test.rate", Rate(), config)
    occurrences = sensor.add("test.occurrences", Rate(WindowedCount()), config)
    count = sensor.add("test.count", WindowedCount(), config)
    other = Sensor("test.sensor2")
    total = other.add("s2.total", CumulativeSum(), config)
    other.record(5.0, T0)
    for i in range(10):
        sensor.record(i, T0)
    # Before any time passes the rate is over (S - 1) windows: 30 s.
    assert occurrences.measure(T0) == pytest.approx(10 / 30, abs=EPS)
    now = T0 + 2000
    assert total.measure(now) == pytest.approx(5.0, abs=EPS)
    assert avg.measure(now) == pytest.approx(4.5, abs=EPS)
    assert maximum.measure(now) == pytest.approx(9, abs=EPS)
    assert minimum.measure(now) == pytest.approx(0.0, abs=EPS)
    assert rate.measure(now) == pytest.approx(45 / 32, abs=EPS)
    assert occurrences.measure(now) == pytest.approx(10 / 32, abs=EPS)
    assert count.measure(now) == pytest.approx(10, abs=EPS)


def test_remove_inactive_metrics() -> None:
    """MetricsTest.testRemoveInactiveMetrics: sensors of 1 s and 3 s expiry; a record resets
    the idle clock."""
    s1 = Sensor("test.s1", created_ms=T0)
    s2 = Sensor("test.s2", created_ms=T0)
    s1.add("test.s1.count", WindowedCount(), MetricConfig())
    s2.add("test.s2.count", WindowedCount(), MetricConfig())
    assert not s1.has_expired(T0, 1) and not s2.has_expired(T0, 3)
    now = T0 + 1001
    assert s1.has_expired(now, 1)
    assert not s2.has_expired(now, 3)
    s2.record(1, now)
    now += 2000
    assert not s2.has_expired(now, 3)
    now += 1001
    assert s2.has_expired(now, 3)


def test_time_windowing() -> None:
    """MetricsTest.testTimeWindowing: 1 ms windows; the oldest event times out at +2 ms."""
    count = WindowedCount()
    config = MetricConfig(samples=2, time_window_ms=1)
    count.record(config, 1.0, T0)
    count.record(config, 1.0, T0 + 1)
    assert count.measure(config, T0 + 1) == pytest.approx(2.0, abs=EPS)
    count.record(config, 1.0, T0 + 2)
    assert count.measure(config, T0 + 2) == pytest.approx(2.0, abs=EPS)


def test_old_data_has_no_effect() -> None:
    """MetricsTest.testOldDataHasNoEffect"""
    maximum = Max()
    config = MetricConfig(samples=2, time_window_ms=100)
    maximum.record(config, 50, T0)
    assert math.isnan(maximum.measure(config, T0 + 2 * 100))


def test_sampled_stat_returns_nan_when_no_values_exist() -> None:
    """MetricsTest.testSampledStatReturnsNaNWhenNoValuesExist"""
    config = MetricConfig(samples=2, time_window_ms=100)
    stats = [Max(), Min(), Avg()]
    for stat in stats:
        stat.record(config, 50, T0)
    for stat in stats:
        assert math.isnan(stat.measure(config, T0 + 2 * 100))


def test_sampled_stat_returns_initial_value_when_no_values_exist() -> None:
    """MetricsTest.testSampledStatReturnsInitialValueWhenNoValuesExist"""
    config = MetricConfig(samples=2, time_window_ms=100)
    count, total = WindowedCount(), WindowedSum()
    count.record(config, 50, T0)
    total.record(config, 50, T0)
    assert count.measure(config, T0 + 2 * 100) == 0
    assert total.measure(config, T0 + 2 * 100) == 0.0


def test_quotas() -> None:
    """MetricsTest.testQuotas: the violating value stays recorded; lower bounds too."""
    sensor = Sensor("test")
    upper = sensor.add("test1.total", CumulativeSum(), MetricConfig(quota=Quota.upper_bound(5.0)))
    sensor.add("test2.total", CumulativeSum(), MetricConfig(quota=Quota.lower_bound(0.0)))
    sensor.record(5.0, T0)
    with pytest.raises(QuotaViolation):
        sensor.record(1.0, T0)
    assert upper.measure(T0) == pytest.approx(6.0, abs=EPS)
    sensor.record(-6.0, T0)
    with pytest.raises(QuotaViolation):
        sensor.record(-1.0, T0)


def test_quotas_equality() -> None:
    """MetricsTest.testQuotasEquality"""
    assert Quota.upper_bound(10.5) != Quota.lower_bound(10.5)
    assert Quota.lower_bound(10.5) == Quota.lower_bound(10.5)


def test_rate_windowing() -> None:
    """MetricsTest.testRateWindowing: 3 samples of 30 s, 100 recorded at 0 s and 30 s, read at
    75 s; after another 3 windows the rates are 0 and the totals stay."""
    config = MetricConfig(samples=3)
    sensor = Sensor("test.sensor")
    rate = sensor.add("test.rate", Rate(), config)
    total = sensor.add("test.total", CumulativeSum(), config)
    count_rate = sensor.add("test.count.rate", Rate(WindowedCount()), config)
    now = T0
    for i in range(config.samples - 1):
        sensor.record(100, now)
        now += config.time_window_ms
        assert total.measure(now) == pytest.approx(100 * (i + 1), abs=EPS)
    now += config.time_window_ms // 2
    elapsed_s = config.time_window_ms / 1000 * (config.samples - 0.5)
    assert rate.measure(now) == pytest.approx(200 / elapsed_s, abs=EPS)
    assert count_rate.measure(now) == pytest.approx(2 / elapsed_s, abs=EPS)
    assert isinstance(rate.stat, Rate)
    assert rate.stat.window_size(config, now) / 1000 == pytest.approx(elapsed_s, abs=EPS)
    assert total.measure(now) == pytest.approx(200, abs=EPS)
    now += config.time_window_ms * config.samples
    assert rate.measure(now) == pytest.approx(0, abs=EPS)
    assert count_rate.measure(now) == pytest.approx(0, abs=EPS)
    assert total.measure(now) == pytest.approx(200, abs=EPS)


def test_simple_rate() -> None:
    """MetricsTest.testSimpleRate: no S-1 padding, floored at one window; the first sample is
    purged past 10 windows and the rate then runs from the second sample's start (1.4 s)."""
    rate = SimpleRate()
    config = MetricConfig(samples=10, time_window_ms=1000)
    rate.record(config, 1000, T0)
    for at, expected in [(0, 1000), (100, 1000), (200, 1000), (400, 1000), (1000, 1000),
                         (1200, 1000 / 1.2), (1400, 1000 / 1.4)]:  # fmt: skip
        assert rate.measure(config, T0 + at) == expected
    rate.record(config, 1000, T0 + 1400)
    assert rate.measure(config, T0 + 1400) == 2000 / 1.4
    assert rate.measure(config, T0 + 2500) == 2000 / 2.5
    rate.record(config, 1000, T0 + 2500)
    assert rate.measure(config, T0 + 2500) == 3000 / 2.5
    assert rate.measure(config, T0 + 9000) == pytest.approx(3000 / 9, abs=1)
    rate.record(config, 1000, T0 + 9000)
    assert rate.measure(config, T0 + 9000) == pytest.approx(4000 / 9, abs=1)
    assert rate.measure(config, T0 + 10_500) == pytest.approx((4000 - 1000) / (10.5 - 1.4), abs=1)
    rate.record(config, 1000, T0 + 10_500)
    assert rate.measure(config, T0 + 10_500) == pytest.approx((5000 - 1000) / (10.5 - 1.4), abs=1)
