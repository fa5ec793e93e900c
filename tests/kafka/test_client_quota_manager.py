"""Kafka's ``ClientQuotaManagerTest`` (core, ``kafka.server``) as vectors.

A produce manager with Kafka's defaults (11 samples of 1 s). Kafka's MockTime does not move
unless the test sleeps, so most records land at one instant, where the rate is over 10 s:
recording ``11 * v`` reads as ``1.1 * v`` per second.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from quotagate.quota import DEFAULT, ClientQuotaManager, EntityName
from quotagate.quota.java import DOUBLE_MAX, UNBOUNDED

T0 = 1_700_000_000_000
SAMPLES = 11  # quota.window.num
WINDOW_S = 1  # quota.window.size.seconds
HOUR_MS = 3600 * 1000  # the quota sensors' inactivity expiry


@dataclass(frozen=True)
class _Client:
    user: str
    client_id: str
    config_user: EntityName = None
    config_client_id: EntityName = None


def _quota_parsing(client1: _Client, client2: _Client, random: _Client, default: _Client) -> None:
    manager = ClientQuotaManager("produce")
    manager.update_quota(client1.config_user, client1.config_client_id, 2000)
    manager.update_quota(client2.config_user, client2.config_client_id, 4000)
    assert manager.quota_limit(random.user, random.client_id) == UNBOUNDED
    assert manager.quota_limit(client1.user, client1.client_id) == 2000
    assert manager.quota_limit(client2.user, client2.client_id) == 4000

    def record(value: float) -> int:
        return manager.record_and_get_throttle_ms(client1.user, client1.client_id, value, T0)

    assert record(2500 * SAMPLES) > 0
    # A changed quota applies to the existing sensor.
    manager.update_quota(client1.config_user, client1.config_client_id, 3000)
    assert manager.quota_limit(client1.user, client1.client_id) == 3000
    assert record(0) == 0
    manager.update_quota(client1.config_user, client1.config_client_id, 500)
    assert manager.quota_limit(client1.user, client1.client_id) == 500
    assert record(0) > 0
    manager.update_quota(client1.config_user, client1.config_client_id, None)
    manager.update_quota(default.config_user, default.config_client_id, 4000)
    assert manager.quota_limit(client1.user, client1.client_id) == 4000
    assert record(1000 * SAMPLES) == 0


def test_client_id_quota_parsing() -> None:
    """ClientQuotaManagerTest.testClientIdQuotaParsing"""
    _quota_parsing(
        _Client("ANONYMOUS", "p1", None, "p1"),
        _Client("ANONYMOUS", "p2", None, "p2"),
        _Client("ANONYMOUS", "random-client-id"),
        _Client("", "", None, DEFAULT),
    )


def test_user_quota_parsing() -> None:
    """ClientQuotaManagerTest.testUserQuotaParsing"""
    _quota_parsing(
        _Client("User1", "p1", "User1", None),
        _Client("User2", "p2", "User2", None),
        _Client("RandomUser", "random-client-id"),
        _Client("", "", DEFAULT, None),
    )


def test_user_client_id_quota_parsing() -> None:
    """ClientQuotaManagerTest.testUserClientIdQuotaParsing"""
    _quota_parsing(
        _Client("User1", "p1", "User1", "p1"),
        _Client("User2", "p2", "User2", "p2"),
        _Client("RandomUser", "random-client-id"),
        _Client("", "", DEFAULT, DEFAULT),
    )


def test_user_quota_parsing_with_default_client_id_quota() -> None:
    """ClientQuotaManagerTest.testUserQuotaParsingWithDefaultClientIdQuota"""
    _quota_parsing(
        _Client("User1", "p1", "User1", None),
        _Client("User2", "p2", "User2", None),
        _Client("RandomUser", "random-client-id"),
        _Client("", "", DEFAULT, None),
    )


def test_user_client_quota_parsing_id_with_default_client_id_quota() -> None:
    """ClientQuotaManagerTest.testUserClientQuotaParsingIdWithDefaultClientIdQuota"""
    _quota_parsing(
        _Client("User1", "p1", "User1", "p1"),
        _Client("User2", "p2", "User2", "p2"),
        _Client("RandomUser", "random-client-id"),
        _Client("", "", DEFAULT, DEFAULT),
    )


def _check_quota(
    manager: ClientQuotaManager,
    user: str,
    client_id: str,
    expected_bound: float,
    value: float,
    expect_throttle: bool,
) -> None:
    assert manager.quota_limit(user, client_id) == expected_bound
    expected_max = (
        WINDOW_S * (SAMPLES - 1) * expected_bound if expected_bound < UNBOUNDED else DOUBLE_MAX
    )
    assert manager.max_value_in_quota_window(user, client_id) == pytest.approx(
        expected_max, abs=0.01
    )
    throttle_ms = manager.record_and_get_throttle_ms(user, client_id, value * SAMPLES, T0)
    if expect_throttle:
        assert throttle_ms > 0
    else:
        assert throttle_ms == 0


def test_get_max_value_in_quota_window_with_non_default_quota_window() -> None:
    """ClientQuotaManagerTest.testGetMaxValueInQuotaWindowWithNonDefaultQuotaWindow"""
    full_windows = 3
    manager = ClientQuotaManager("fetch", window_num=full_windows + 1)
    assert manager.max_value_in_quota_window("userA", "client1") == DOUBLE_MAX
    manager.update_quota(DEFAULT, None, 10)
    assert manager.max_value_in_quota_window("userA", "client1") == 10 * full_windows


def test_set_and_remove_default_user_quota() -> None:
    """ClientQuotaManagerTest.testSetAndRemoveDefaultUserQuota"""
    manager = ClientQuotaManager("produce")
    _check_quota(manager, "userA", "client1", UNBOUNDED, 1000, False)
    manager.update_quota(DEFAULT, None, 10)
    _check_quota(manager, "userA", "client1", 10, 1000, True)
    manager.update_quota(DEFAULT, None, None)
    _check_quota(manager, "userA", "client1", UNBOUNDED, 1000, False)


def test_set_and_remove_user_quota() -> None:
    """ClientQuotaManagerTest.testSetAndRemoveUserQuota"""
    manager = ClientQuotaManager("produce")
    manager.update_quota("userA", None, 10)
    _check_quota(manager, "userA", "client1", 10, 1000, True)
    manager.update_quota("userA", None, None)
    _check_quota(manager, "userA", "client1", UNBOUNDED, 1000, False)


def test_set_and_remove_user_client_quota() -> None:
    """ClientQuotaManagerTest.testSetAndRemoveUserClientQuota"""
    manager = ClientQuotaManager("produce")
    manager.update_quota("userA", "client1", 10)
    _check_quota(manager, "userA", "client1", 10, 1000, True)
    manager.update_quota("userA", "client1", None)
    _check_quota(manager, "userA", "client1", UNBOUNDED, 1000, False)


def test_quota_config_precedence() -> None:
    """ClientQuotaManagerTest.testQuotaConfigPrecedence: the eight levels and who shares what."""
    m = ClientQuotaManager("produce")
    m.update_quota(DEFAULT, None, 1000)
    m.update_quota(None, DEFAULT, 2000)
    m.update_quota(DEFAULT, DEFAULT, 3000)
    m.update_quota("userA", None, 4000)
    m.update_quota("userA", "client1", 5000)
    m.update_quota("userB", None, 6000)
    m.update_quota("userB", "client1", 7000)
    m.update_quota("userB", DEFAULT, 8000)
    m.update_quota("userC", None, 10000)
    m.update_quota(None, "client1", 9000)

    _check_quota(m, "userA", "client1", 5000, 4500, False)
    _check_quota(m, "userA", "client2", 4000, 4500, True)
    _check_quota(m, "userA", "client3", 4000, 0, True)  # the user's quota is shared
    _check_quota(m, "userA", "client1", 5000, 0, False)  # (user, client) is exclusive
    _check_quota(m, "userB", "client1", 7000, 8000, True)
    _check_quota(m, "userB", "client2", 8000, 7000, False)
    _check_quota(m, "userB", "client3", 8000, 7000, False)
    _check_quota(m, "userD", "client1", 3000, 3500, True)
    _check_quota(m, "userD", "client2", 3000, 2500, False)
    _check_quota(m, "userE", "client1", 3000, 2500, False)

    m.update_quota(DEFAULT, DEFAULT, None)
    _check_quota(m, "userD", "client1", 1000, 0, False)  # new tags: a fresh sensor
    _check_quota(m, "userE", "client4", 1000, 1500, True)
    _check_quota(m, "userF", "client4", 1000, 800, False)
    _check_quota(m, "userF", "client5", 1000, 800, True)  # shared by the user's clients

    m.update_quota(DEFAULT, None, None)
    _check_quota(m, "userF", "client4", 2000, 0, False)
    _check_quota(m, "userF", "client5", 2000, 0, False)
    _check_quota(m, "userF", "client5", 2000, 2500, True)
    _check_quota(m, "userG", "client5", 2000, 0, True)  # a client id is shared across users

    m.update_quota("userA", None, 8000)
    m.update_quota("userA", "client1", 10000)
    _check_quota(m, "userA", "client2", 8000, 0, False)
    _check_quota(m, "userA", "client2", 8000, 4500, True)  # new and earlier values add up
    _check_quota(m, "userA", "client1", 10000, 0, False)
    _check_quota(m, "userA", "client1", 10000, 6000, True)
    m.update_quota("userA", "client1", None)
    _check_quota(m, "userA", "client6", 8000, 0, True)
    m.update_quota("userA", "client6", 11000)
    _check_quota(m, "userA", "client6", 11000, 8500, False)
    m.update_quota("userA", DEFAULT, 12000)
    m.update_quota("userA", "client6", None)
    _check_quota(m, "userA", "client6", 12000, 4000, True)


def test_quota_violation() -> None:
    """ClientQuotaManagerTest.testQuotaViolation: 400 B each second for 10 s under a 500 B/s
    client-id default, then 2300 at 10.5 s: 6300 B over 10.5 s, throttled 2100 ms."""
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 500)
    now = T0
    for _ in range(10):
        assert manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 400, now) == 0
        now += 1000
    assert manager.throttled_channels.queue_size == 0
    now += 500
    throttle_ms = manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 2300, now)
    assert throttle_ms == 2100
    manager.throttle("ANONYMOUS", "unknown", "channel", throttle_ms, now)
    assert manager.throttled_channels.queue_size == 1
    assert manager.due_channels(now) == []
    now += throttle_ms
    assert manager.due_channels(now) == ["channel"]
    assert manager.throttled_channels.queue_size == 0
    for _ in range(10):
        manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 400, now)
        now += 1000
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 0, now) == 0


def test_expire_throttle_time_sensor() -> None:
    """ClientQuotaManagerTest.testExpireThrottleTimeSensor: a record recreates a removed
    throttle-time sensor. Kafka removes it by hand; here it expires (idle an hour) while the
    quota sensor, recorded since, stays."""
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 500)
    manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 100, T0)
    manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 100, T0 + HOUR_MS - 1000)
    now = T0 + HOUR_MS + 1
    manager.expire_sensors(now)
    assert "ProduceThrottleTime-:client1" not in manager.sensor_names()
    assert "Produce-:client1" in manager.sensor_names()
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 10000, now) > 0
    assert "ProduceThrottleTime-:client1" in manager.sensor_names()


def test_expire_quota_sensors() -> None:
    """ClientQuotaManagerTest.testExpireQuotaSensors: both sensors are recreated."""
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 500)
    manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 100, T0)
    now = T0 + HOUR_MS + 1
    manager.expire_sensors(now)
    assert manager.sensor_names() == []
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 10000, now) > 0
    assert "ProduceThrottleTime-:client1" in manager.sensor_names()
    assert "Produce-:client1" in manager.sensor_names()


def test_client_id_not_sanitized() -> None:
    """ClientQuotaManagerTest.testClientIdNotSanitized: sensor names carry the raw client id."""
    manager = ClientQuotaManager("produce")
    client_id = "client@#$%"
    manager.update_quota(None, DEFAULT, 500)
    manager.record_and_get_throttle_ms("ANONYMOUS", client_id, 100, T0)
    assert "ProduceThrottleTime-:" + client_id in manager.sensor_names()
    assert "Produce-:" + client_id in manager.sensor_names()
