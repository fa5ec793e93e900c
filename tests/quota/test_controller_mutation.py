"""Spec §9.6: KIP-599 strict and permissive quotas, the manager's throttle, exact."""

from __future__ import annotations

import pytest

from quotagate.quota import (
    DEFAULT,
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from quotagate.quota.controller_mutation import UnboundedControllerMutationQuota

T0 = 1_700_000_000_000


def _manager() -> ControllerMutationQuotaManager:
    manager = ControllerMutationQuotaManager(window_num=10, window_size_s=1)
    manager.update_quota("ANONYMOUS", "test-client", 10)
    return manager


def test_strict_quota() -> None:
    manager = _manager()
    quota = manager.new_strict_quota("ANONYMOUS", "test-client", T0)
    quota.record(90, T0)
    assert manager.tokens("ANONYMOUS", "test-client", T0) == 10
    assert quota.throttle_time(T0) == 0
    quota.record(90, T0)
    assert manager.tokens("ANONYMOUS", "test-client", T0) == -80
    assert quota.throttle_time(T0) == 0
    with pytest.raises(ThrottlingQuotaExceeded) as error:
        quota.record(90, T0)
    assert error.value.throttle_ms == 8000
    assert error.value.error_code == 89
    assert str(error.value) == "The throttling quota has been exceeded."
    assert quota.is_exceeded
    assert manager.tokens("ANONYMOUS", "test-client", T0) == -80  # not recorded
    assert quota.throttle_time(T0 + 5000) == 3000


def test_permissive_quota() -> None:
    manager = _manager()
    quota = manager.new_permissive_quota("ANONYMOUS", "test-client", T0)
    quota.record(90, T0)
    assert quota.throttle_time(T0) == 0
    quota.record(90, T0)
    assert quota.throttle_time(T0) == 8000
    quota.record(90, T0)
    assert quota.throttle_time(T0) == 17000
    assert manager.tokens("ANONYMOUS", "test-client", T0) == -170
    assert not quota.is_exceeded
    assert quota.throttle_time(T0 + 5000) == 12000


@pytest.mark.parametrize(("tokens", "expected"), [(0, 0), (-5, 500), (-10, 1000)])
def test_throttle_time_from_tokens(tokens: float, expected: int) -> None:
    manager = _manager()
    quota = manager.new_strict_quota("ANONYMOUS", "test-client", T0)
    quota.record(100 - tokens, T0)  # burst is 100 tokens
    assert manager.tokens("ANONYMOUS", "test-client", T0) == tokens
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "test-client", 1, T0) == expected


def test_controller_mutation_quota_violation() -> None:
    manager = _manager()
    now = T0
    for _ in range(10):
        assert manager.record_and_get_throttle_ms("ANONYMOUS", "test-client", 10, now) == 0
        now += 1000
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "test-client", 110, now) == 0
    throttle = manager.record_and_get_throttle_ms("ANONYMOUS", "test-client", 110, now)
    assert throttle == 1000
    now += throttle
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "test-client", 110, now) == 0


def test_integration_numbers_strict_and_permissive() -> None:
    """ControllerMutationQuotaTest: quota 2.0/s, burst 20, two topics of 30 partitions."""
    manager = ControllerMutationQuotaManager(window_num=10, window_size_s=1)
    manager.update_quota("alice", None, 2.0)
    strict = manager.new_quota_for(19, 6, "alice", "admin", T0)
    errors = []
    for _ in range(2):
        try:
            strict.record(30, T0)
            errors.append(0)
        except ThrottlingQuotaExceeded as error:
            errors.append(error.error_code)
            assert error.throttle_ms <= 5000
    assert errors == [0, 89]
    assert strict.throttle_time(T0) == 5000

    permissive_manager = ControllerMutationQuotaManager(window_num=10, window_size_s=1)
    permissive_manager.update_quota("alice", None, 2.0)
    permissive = permissive_manager.new_quota_for(19, 5, "alice", "admin", T0)
    permissive.record(30, T0)
    permissive.record(30, T0)
    assert permissive.throttle_time(T0) == 20000


@pytest.mark.parametrize(("api_key", "strict_from"), [(19, 6), (20, 5), (37, 3)])
def test_strictness_by_version(api_key: int, strict_from: int) -> None:
    manager = ControllerMutationQuotaManager()
    manager.update_quota(None, DEFAULT, 1)
    for version in (strict_from - 1, strict_from):
        quota = manager.new_quota_for(api_key, version, "u", f"c{version}", T0)
        quota.record(12, T0)  # burst 11: the bucket goes negative, both accept
        if version >= strict_from:
            with pytest.raises(ThrottlingQuotaExceeded):
                quota.record(1, T0)
        else:
            quota.record(1, T0)
            assert quota.throttle_time(T0) == 2000


def test_unbounded_when_no_quota_configured() -> None:
    manager = ControllerMutationQuotaManager()
    quota = manager.new_strict_quota("u", "c", T0)
    assert isinstance(quota, UnboundedControllerMutationQuota)
    quota.record(10**9, T0)
    assert quota.throttle_time(T0) == 0
    assert isinstance(manager.new_permissive_quota("u", "c", T0), UnboundedControllerMutationQuota)
    assert manager.record_and_get_throttle_ms("u", "c", 10**9, T0) == 0


def test_default_burst_is_eleven_times_the_rate() -> None:
    manager = ControllerMutationQuotaManager()
    manager.update_quota(None, DEFAULT, 5)
    assert manager.record_and_get_throttle_ms("u", "c", 0, T0) == 0
    assert manager.tokens("u", "c", T0) == 55


def test_mutation_rates_are_read_without_refilling_the_bucket() -> None:
    manager = _manager()
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "test-client", 60, T0) == 0
    rates = dict(manager.mutation_rates(T0 + 1000))
    # The mutation-rate uses the broker's default window (2 x 30 s): 60 over one padded
    # window of 30 s plus the second elapsed.
    assert rates == {("ANONYMOUS", "test-client"): pytest.approx(60 / 31)}
    metric = manager.quota_metric("ANONYMOUS", "test-client")
    assert metric is not None
    assert metric.stat.last_update_ms == T0  # type: ignore[attr-defined]
