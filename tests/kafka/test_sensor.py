"""Kafka's ``SensorTest`` (clients, ``org.apache.kafka.common.metrics``) as vectors.

Recording levels, the metrics registry and thread safety are not modelled by the engine (see
docs/engine.md, "Kafka's tests as vectors").
"""

from __future__ import annotations

import pytest

from quotagate.quota import (
    Avg,
    MetricConfig,
    Quota,
    QuotaViolation,
    Rate,
    Sensor,
    TokenBucket,
    WindowedSum,
)
from quotagate.quota.stat import Stat

T0 = 1_700_000_000_000


def test_expired_sensor() -> None:
    """SensorTest.testExpiredSensor: a sensor idle for longer than its expiry has expired."""
    sensor = Sensor("sensor", created_ms=T0)
    sensor.add("test1", Avg(), MetricConfig())
    assert not sensor.has_expired(T0 + 60_000, 60)
    assert sensor.has_expired(T0 + 61_000, 60)


def test_idempotent_add() -> None:
    """SensorTest.testIdempotentAdd: a name already present keeps its first metric."""
    sensor = Sensor("sensor")
    first = sensor.add("test-metric", Avg(), MetricConfig())
    assert sensor.add("test-metric", Avg(), MetricConfig()) is first
    assert sensor.add("test-metric", WindowedSum(), MetricConfig()) is first
    assert len(sensor.metrics) == 1
    assert type(sensor.metrics[0].stat) is Avg


def test_should_return_presence_of_metrics() -> None:
    """SensorTest.shouldReturnPresenceOfMetrics"""
    sensor = Sensor("sensor")
    assert not sensor.metrics
    sensor.add("name1", WindowedSum(), MetricConfig())
    assert sensor.metrics
    sensor.add("name2", Avg(), MetricConfig())
    assert sensor.metrics


def test_strict_quota_enforcement_with_rate() -> None:
    """SensorTest.testStrictQuotaEnforcementWithRate: a windowed rate keeps refusing after
    the theoretical 5 s wait, because the rate is still 3 then."""
    sensor = Sensor("sensor")
    config = MetricConfig(samples=11, time_window_ms=1000, quota=Quota.upper_bound(2))
    rate = sensor.add("rate", Rate(), config)
    sensor.record_strict(30, T0)
    assert rate.measure(T0) == pytest.approx(3, abs=0.1)
    assert rate.measure(T0 + 5000) == pytest.approx(3, abs=0.1)
    with pytest.raises(QuotaViolation):
        sensor.record_strict(30, T0 + 5000)


def test_strict_quota_enforcement_with_token_bucket() -> None:
    """SensorTest.testStrictQuotaEnforcementWithTokenBucket"""
    sensor = Sensor("sensor")
    config = MetricConfig(samples=10, time_window_ms=1000, quota=Quota.upper_bound(2))
    tokens = sensor.add("credits", TokenBucket(), config)
    sensor.record_strict(30, T0)
    assert tokens.measure(T0) == -10
    assert tokens.measure(T0 + 5000) == 0
    sensor.record_strict(30, T0 + 5000)
    assert tokens.measure(T0 + 5000) == -30


class _Spy(Stat):
    """Stands in for Kafka's mocked ``MeasurableStat``: remembers the configs it was given."""

    def __init__(self) -> None:
        self.records: list[tuple[MetricConfig, float, int]] = []
        self.measures: list[tuple[MetricConfig, int]] = []

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.records.append((config, value, now_ms))

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.measures.append((config, now_ms))
        return 0.0

    def clone(self) -> Stat:
        return self


def test_record_and_check_quota_use_metric_config_of_each_stat() -> None:
    """SensorTest.testRecordAndCheckQuotaUseMetricConfigOfEachStat"""
    sensor = Sensor("sensor")
    stat1, stat2 = _Spy(), _Spy()
    config1 = MetricConfig(quota=Quota.upper_bound(5))
    config2 = MetricConfig(quota=Quota.upper_bound(10))
    sensor.add("stat1", stat1, config1)
    sensor.add("stat2", stat2, config2)
    sensor.record(10, 1)
    assert stat1.records == [(config1, 10, 1)]
    assert stat2.records == [(config2, 10, 1)]
    sensor.check_quotas(2)
    assert stat1.measures[-1] == (config1, 2)
    assert stat2.measures[-1] == (config2, 2)


def test_updating_metric_config_is_reflected_in_the_sensor() -> None:
    """SensorTest.testUpdatingMetricConfigIsReflectedInTheSensor"""
    sensor = Sensor("sensor")
    stat = _Spy()
    config = MetricConfig(quota=Quota.upper_bound(5))
    metric = sensor.add("stat", stat, config)
    sensor.record(10, 1)
    assert stat.records[-1] == (config, 10, 1)
    sensor.check_quotas(2)
    assert stat.measures[-1] == (config, 2)
    new_config = MetricConfig(quota=Quota.upper_bound(10))
    metric.config = new_config
    sensor.record(10, 3)
    assert stat.records[-1] == (new_config, 10, 3)
    sensor.check_quotas(4)
    assert stat.measures[-1] == (new_config, 4)
