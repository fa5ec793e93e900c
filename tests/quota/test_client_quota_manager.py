"""Spec §9.4 and §9.5: ClientQuotaManagerTest and ClientRequestQuotaManagerTest, exact."""

from __future__ import annotations

import sys

import pytest

from quotagate.quota import DEFAULT, UNBOUNDED, ClientQuotaManager, RequestQuotaManager

T0 = 1_700_000_000_000


def test_quota_violation_throttles_2100_ms_and_releases_the_channel() -> None:
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 500)
    for second in range(10):
        now = T0 + second * 1000
        assert manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 400, now) == 0
    assert manager.throttled_channels.queue_size == 0
    now = T0 + 10_500
    throttle = manager.record_and_get_throttle_ms("ANONYMOUS", "unknown", 2300, now)
    assert throttle == 2100
    manager.throttle("ANONYMOUS", "unknown", "channel-1", throttle, now)
    assert manager.throttled_channels.queue_size == 1
    assert manager.due_channels(now + 2099) == []
    assert manager.due_channels(now + 2100) == ["channel-1"]
    assert manager.throttled_channels.queue_size == 0
    assert "ProduceThrottleTime-:unknown" in manager.sensor_names()


# (user, client, expected bound, v, throttled?, sharing key)
Step = tuple[str, str, float, float, bool, tuple[str, str]]


def _check(manager: ClientQuotaManager, steps: list[Step], now: int) -> None:
    for number, (user, client, bound, value, throttled, key) in enumerate(steps, start=1):
        assert manager.quota_limit(user, client) == bound, f"step {number}"
        assert manager.max_value_in_quota_window(user, client) == 10 * bound
        assert manager.sharing_key(user, client) == key, f"step {number}"
        throttle = manager.record_and_get_throttle_ms(user, client, 11 * value, now)
        assert (throttle > 0) == throttled, f"step {number}: throttle {throttle}"


def test_quota_config_precedence() -> None:
    manager = ClientQuotaManager("produce")
    for user, client, value in [
        (DEFAULT, None, 1000),
        (None, DEFAULT, 2000),
        (DEFAULT, DEFAULT, 3000),
        ("userA", None, 4000),
        ("userA", "client1", 5000),
        ("userB", None, 6000),
        ("userB", "client1", 7000),
        ("userB", DEFAULT, 8000),
        ("userC", None, 10000),
        (None, "client1", 9000),
    ]:
        manager.update_quota(user, client, value)
    now = T0
    _check(
        manager,
        [
            ("userA", "client1", 5000, 4500, False, ("userA", "client1")),
            ("userA", "client2", 4000, 4500, True, ("userA", "")),
            ("userA", "client3", 4000, 0, True, ("userA", "")),
            ("userA", "client1", 5000, 0, False, ("userA", "client1")),
            ("userB", "client1", 7000, 8000, True, ("userB", "client1")),
            ("userB", "client2", 8000, 7000, False, ("userB", "client2")),
            ("userB", "client3", 8000, 7000, False, ("userB", "client3")),
            ("userD", "client1", 3000, 3500, True, ("userD", "client1")),
            ("userD", "client2", 3000, 2500, False, ("userD", "client2")),
            ("userE", "client1", 3000, 2500, False, ("userE", "client1")),
        ],
        now,
    )
    manager.update_quota(DEFAULT, DEFAULT, None)
    _check(
        manager,
        [
            ("userD", "client1", 1000, 0, False, ("userD", "")),
            ("userE", "client4", 1000, 1500, True, ("userE", "")),
            ("userF", "client4", 1000, 800, False, ("userF", "")),
            ("userF", "client5", 1000, 800, True, ("userF", "")),
        ],
        now,
    )
    manager.update_quota(DEFAULT, None, None)
    _check(
        manager,
        [
            ("userF", "client4", 2000, 0, False, ("", "client4")),
            ("userF", "client5", 2000, 0, False, ("", "client5")),
            ("userF", "client5", 2000, 2500, True, ("", "client5")),
            ("userG", "client5", 2000, 0, True, ("", "client5")),
        ],
        now,
    )
    manager.update_quota("userA", None, 8000)
    manager.update_quota("userA", "client1", 10000)
    _check(
        manager,
        [
            ("userA", "client2", 8000, 0, False, ("userA", "")),
            ("userA", "client2", 8000, 4500, True, ("userA", "")),
            ("userA", "client1", 10000, 0, False, ("userA", "client1")),
            ("userA", "client1", 10000, 6000, True, ("userA", "client1")),
        ],
        now,
    )
    manager.update_quota("userA", "client1", None)
    _check(manager, [("userA", "client6", 8000, 0, True, ("userA", ""))], now)
    manager.update_quota("userA", "client6", 11000)
    _check(manager, [("userA", "client6", 11000, 8500, False, ("userA", "client6"))], now)
    manager.update_quota("userA", DEFAULT, 12000)
    manager.update_quota("userA", "client6", None)
    _check(manager, [("userA", "client6", 12000, 4000, True, ("userA", "client6"))], now)


@pytest.mark.parametrize(
    ("user", "client"), [(DEFAULT, None), ("userA", None), ("userA", "client1")]
)
def test_set_and_remove_quota(user: object, client: object) -> None:
    manager = ClientQuotaManager("produce")
    assert manager.quota_limit("userA", "client1") == UNBOUNDED
    assert manager.max_value_in_quota_window("userA", "client1") == sys.float_info.max
    assert manager.record_and_get_throttle_ms("userA", "client1", 11_000, T0) == 0
    manager.update_quota(user, client, 10)  # type: ignore[arg-type]
    assert manager.quota_limit("userA", "client1") == 10
    assert manager.max_value_in_quota_window("userA", "client1") == 100
    assert manager.record_and_get_throttle_ms("userA", "client1", 11_000, T0) == 1_090_000
    manager.update_quota(user, client, None)  # type: ignore[arg-type]
    assert manager.quota_limit("userA", "client1") == UNBOUNDED
    assert manager.record_and_get_throttle_ms("userA", "client1", 11_000, T0) == 0


def test_max_value_in_quota_window_with_non_default_window() -> None:
    manager = ClientQuotaManager("produce", window_num=4)
    assert manager.max_value_in_quota_window("u", "c") == sys.float_info.max
    manager.update_quota(DEFAULT, None, 10)
    assert manager.max_value_in_quota_window("u", "c") == 30


@pytest.mark.parametrize(
    ("user", "client"),
    [(None, "p1"), ("p1", None), ("p1", "p1")],
    ids=["client-id", "user", "user-client-id"],
)
def test_quota_parsing(user: str | None, client: str | None) -> None:
    manager = ClientQuotaManager("produce")
    other_user, other_client = ("p2" if user else None), ("p2" if client else None)
    manager.update_quota(user, client, 2000)
    manager.update_quota(other_user, other_client, 4000)
    assert manager.quota_limit("random", "random") == UNBOUNDED
    assert manager.quota_limit("p1", "p1") == 2000
    assert manager.record_and_get_throttle_ms("p1", "p1", 2500 * 11, T0) > 0
    manager.update_quota(user, client, 3000)
    assert manager.record_and_get_throttle_ms("p1", "p1", 0, T0) == 0
    manager.update_quota(user, client, 500)
    assert manager.record_and_get_throttle_ms("p1", "p1", 0, T0) > 0
    manager.update_quota(user, client, None)
    manager.update_quota(DEFAULT if user else None, DEFAULT if client else None, 4000)
    assert manager.quota_limit("p1", "p1") == 4000
    assert manager.record_and_get_throttle_ms("p1", "p1", 1000 * 11, T0) == 0


def test_client_id_is_not_sanitized_but_user_is() -> None:
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 100)
    manager.record_and_get_throttle_ms("ANONYMOUS", "client@#$%", 10, T0)
    assert "Produce-:client@#$%" in manager.sensor_names()
    users = ClientQuotaManager("produce")
    users.update_quota("a user*~", None, 100)
    assert users.sharing_key("a user*~", "c") == ("a%20user%2A%7E", "")
    assert users.quota_limit("a user*~", "c") == 100


def test_sensor_names_in_client_id_mode() -> None:
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, "client1", 10)
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 1000, T0) > 0
    manager.throttle("ANONYMOUS", "client1", "ch", 5, T0)
    assert set(manager.sensor_names()) == {"Produce-:client1", "ProduceThrottleTime-:client1"}


def test_the_throttle_time_sensor_is_created_with_the_first_record() -> None:
    # ClientQuotaManager.getOrCreateQuotaSensors creates both sensors of a sharing key at once.
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, "client1", 10_000)
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "client1", 1, T0) == 0
    assert set(manager.sensor_names()) == {"Produce-:client1", "ProduceThrottleTime-:client1"}
    assert manager.expire_sensors(T0 + 3_600_000) == []
    assert manager.sensor_names() != []


def test_no_quota_configured_records_nothing() -> None:
    manager = ClientQuotaManager("fetch")
    assert manager.record_and_get_throttle_ms("u", "c", 10**9, T0) == 0
    assert manager.sensor_names() == []


def test_expired_sensors_are_recreated_with_empty_history() -> None:
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 10)
    assert manager.record_and_get_throttle_ms("u", "c", 1000, T0) > 0
    assert manager.expire_sensors(T0 + 3_600_000) == []  # strictly more than an hour
    assert manager.expire_sensors(T0 + 3_600_001) == [("", "c")]
    assert manager.sensor_names() == []
    assert manager.record_and_get_throttle_ms("u", "c", 10, T0 + 3_600_002) == 0


def test_request_quota_throttles_210_ms_capped_at_one_window() -> None:
    manager = RequestQuotaManager()
    manager.update_quota("ANONYMOUS", "test-client", 1)
    for second in range(10):
        throttle = manager.record_nanos_and_get_throttle_ms(
            "ANONYMOUS", "test-client", 4_000_000, T0 + second * 1000
        )
        assert throttle == 0
    now = T0 + 10_500
    throttle = manager.record_nanos_and_get_throttle_ms("ANONYMOUS", "test-client", 67_100_000, now)
    assert throttle == 210
    manager.throttle("ANONYMOUS", "test-client", "ch", throttle, now)
    assert manager.throttled_channels.queue_size == 1
    assert manager.due_channels(now + 210) == ["ch"]
    assert manager.throttled_channels.queue_size == 0
    # A huge spike is still throttled for one window at most (KIP-124).
    assert manager.record_nanos_and_get_throttle_ms("ANONYMOUS", "test-client", 10**10, now) == 1000


def test_request_quota_exempt_time_is_separate_and_never_throttled() -> None:
    manager = RequestQuotaManager()
    manager.record_exempt(10**9, T0)
    assert manager.exempt_rate(T0) == 0  # quotas disabled: nothing recorded
    manager.update_quota(None, DEFAULT, 1)
    manager.record_exempt(10**9, T0)
    assert manager.exempt_rate(T0) == pytest.approx(100 / 30)
    assert manager.record_nanos_and_get_throttle_ms("u", "c", 0, T0) == 0


def test_stable_entry_point_request_type_caps_at_one_window() -> None:
    manager = ClientQuotaManager("request")
    manager.update_quota(None, DEFAULT, 1)
    assert manager.record_and_get_throttle_ms("u", "c", 10_000, T0) == 1000
