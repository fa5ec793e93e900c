"""Kafka's ``ControllerMutationQuotaManagerTest.scala`` (core, ``kafka.server``) as vectors: its
classes ``StrictControllerMutationQuotaTest``, ``PermissiveControllerMutationQuotaTest`` and
``ControllerMutationQuotaManagerTest``.

The quota objects are built on a sensor with one token bucket of 10 per second over 10
windows of 1 s (a burst of 100); the manager tests use ``ClientQuotaManagerConfig(10, 1)``.
"""

from __future__ import annotations

import pytest

from quotagate.quota import (
    ControllerMutationQuotaManager,
    MetricConfig,
    Quota,
    QuotaViolation,
    Sensor,
    ThrottlingQuotaExceeded,
    TokenBucket,
)
from quotagate.quota.controller_mutation import (
    PermissiveControllerMutationQuota,
    StrictControllerMutationQuota,
    UnboundedControllerMutationQuota,
    mutation_throttle_time,
)
from quotagate.quota.sensor import Metric

T0 = 1_700_000_000_000
USER, CLIENT = "ANONYMOUS", "test-client"


def _bucket_sensor() -> Sensor:
    sensor = Sensor("sensor")
    config = MetricConfig(samples=10, time_window_ms=1000, quota=Quota.upper_bound(10))
    sensor.add("rate", TokenBucket(), config)
    return sensor


def test_strict_controller_mutation_quota_violation() -> None:
    """StrictControllerMutationQuotaTest.testControllerMutationQuotaViolation: accepted while
    tokens remain (even into the negative), then refused with a throttle that decays."""
    quota = StrictControllerMutationQuota(_bucket_sensor())
    assert not quota.is_exceeded
    quota.record(90, T0)  # tokens 10
    assert not quota.is_exceeded
    assert quota.throttle_time(T0) == 0
    quota.record(90, T0)  # tokens -80
    assert not quota.is_exceeded
    assert quota.throttle_time(T0) == 0
    with pytest.raises(ThrottlingQuotaExceeded):
        quota.record(90, T0)
    assert quota.is_exceeded
    assert quota.throttle_time(T0) == 8000
    assert quota.throttle_time(T0 + 5000) == 3000


def test_permissive_controller_mutation_quota_violation() -> None:
    """PermissiveControllerMutationQuotaTest.testControllerMutationQuotaViolation: everything
    is accepted, never exceeded, and the throttle grows with the debt."""
    quota = PermissiveControllerMutationQuota(_bucket_sensor())
    assert not quota.is_exceeded
    quota.record(90, T0)  # tokens 10
    assert not quota.is_exceeded
    assert quota.throttle_time(T0) == 0
    quota.record(90, T0)  # tokens -80
    assert not quota.is_exceeded
    assert quota.throttle_time(T0) == 8000
    quota.record(90, T0)  # tokens -170
    assert not quota.is_exceeded
    assert quota.throttle_time(T0) == 17000
    assert quota.throttle_time(T0 + 5000) == 12000


def test_throttle_time() -> None:
    """ControllerMutationQuotaManagerTest.testThrottleTime: the time to refill to zero."""
    metric = Metric("tokens", TokenBucket(), MetricConfig())
    assert mutation_throttle_time(QuotaViolation(metric, 0, 10)) == 0
    assert mutation_throttle_time(QuotaViolation(metric, -5, 10)) == 500
    assert mutation_throttle_time(QuotaViolation(metric, -10, 10)) == 1000


def _manager() -> ControllerMutationQuotaManager:
    return ControllerMutationQuotaManager(window_num=10, window_size_s=1)


def test_controller_mutation_quota_violation() -> None:
    """ControllerMutationQuotaManagerTest.testControllerMutationQuotaViolation: strict, so a
    spike of 110 against 100 tokens passes and the next one is refused for 1 s."""
    manager = _manager()
    manager.update_quota(USER, CLIENT, 10)
    now = T0
    for _ in range(10):
        assert manager.record_and_get_throttle_ms(USER, CLIENT, 10, now) == 0
        now += 1000
    assert manager.throttled_channels.queue_size == 0
    assert manager.record_and_get_throttle_ms(USER, CLIENT, 110, now) == 0
    throttle_ms = manager.record_and_get_throttle_ms(USER, CLIENT, 110, now)
    assert throttle_ms == 1000
    manager.throttle(USER, CLIENT, "channel", throttle_ms, now)
    assert manager.throttled_channels.queue_size == 1
    assert manager.due_channels(now) == []
    now += throttle_ms
    assert manager.due_channels(now) == ["channel"]
    assert manager.throttled_channels.queue_size == 0
    assert manager.record_and_get_throttle_ms(USER, CLIENT, 110, now) == 0


def test_new_strict_quota_for_returns_unbounded_quota_when_quota_is_disabled() -> None:
    """ControllerMutationQuotaManagerTest.testNewStrictQuotaForReturnsUnboundedQuotaWhenQuotaIsDisabled"""
    quota = _manager().new_strict_quota(USER, CLIENT, T0)
    assert isinstance(quota, UnboundedControllerMutationQuota)


def test_new_strict_quota_for_returns_strict_quota_when_quota_is_enabled() -> None:
    """ControllerMutationQuotaManagerTest.testNewStrictQuotaForReturnsStrictQuotaWhenQuotaIsEnabled"""
    manager = _manager()
    manager.update_quota(USER, CLIENT, 10)
    assert isinstance(manager.new_strict_quota(USER, CLIENT, T0), StrictControllerMutationQuota)


def test_new_permissive_quota_for_returns_unbounded_quota_when_quota_is_disabled() -> None:
    """ControllerMutationQuotaManagerTest.testNewPermissiveQuotaForReturnsUnboundedQuotaWhenQuotaIsDisabled"""
    quota = _manager().new_permissive_quota(USER, CLIENT, T0)
    assert isinstance(quota, UnboundedControllerMutationQuota)


def test_new_permissive_quota_for_returns_strict_quota_when_quota_is_enabled() -> None:
    """ControllerMutationQuotaManagerTest.testNewPermissiveQuotaForReturnsStrictQuotaWhenQuotaIsEnabled
    (despite its name, Kafka expects a permissive quota)"""
    manager = _manager()
    manager.update_quota(USER, CLIENT, 10)
    quota = manager.new_permissive_quota(USER, CLIENT, T0)
    assert isinstance(quota, PermissiveControllerMutationQuota)
