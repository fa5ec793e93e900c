"""Kafka's ``ClientRequestQuotaManagerTest`` (core, ``kafka.server``) as vectors.

A request quota of 1 % (10 ms of thread time per second) on (ANONYMOUS, test-client), with
Kafka's default windows (11 of 1 s); a throttle never exceeds one window (1000 ms).
"""

from __future__ import annotations

from quotagate.quota import RequestQuotaManager, nanos_to_percentage

T0 = 1_700_000_000_000
USER, CLIENT = "ANONYMOUS", "test-client"


def _percent(millis: float) -> float:
    # Kafka's millisToPercent: millis * 1000 * 1000 nanos, converted at 1e-7 per nano.
    return nanos_to_percentage(millis * 1000 * 1000)


def test_request_percentage_quota_violation() -> None:
    """ClientRequestQuotaManagerTest.testRequestPercentageQuotaViolation"""
    manager = RequestQuotaManager()
    manager.update_quota(USER, CLIENT, 1)

    def record(millis: float, now: int) -> int:
        return manager.record_and_get_throttle_ms(USER, CLIENT, _percent(millis), now)

    now = T0
    for _ in range(10):
        assert record(4, now) == 0
        now += 1000
    assert manager.throttled_channels.queue_size == 0
    # 4 ms x 10 + 67.1 ms = 107.1 ms over 10.5 s: 10.2 ms/s against 10, throttled 210 ms.
    now += 500
    throttle_ms = record(67.1, now)
    assert throttle_ms == 210
    manager.throttle(USER, CLIENT, "channel", throttle_ms, now)
    assert manager.throttled_channels.queue_size == 1
    assert manager.due_channels(now) == []
    now += throttle_ms
    assert manager.due_channels(now) == ["channel"]
    assert manager.throttled_channels.queue_size == 0
    for _ in range(11):
        record(4, now)
        now += 1000
    assert record(0, now) == 0
    # A spike that needs more than one window to drain is throttled one window at a time.
    assert record(500, now) == 1000
    for _ in range(10):
        now += 1000
        assert record(0, now) == 1000
    now += 1000
    assert record(0, now) == 0
