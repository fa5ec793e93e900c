"""Per-topic bytes-in thresholds (seed 002) and the one-minute EWMA meter under them."""

from __future__ import annotations

import math

import pytest

from quotagate.quota import EwmaMeter, ThresholdError, TopicBytesInQuota

T0 = 1_700_000_000_000
ALPHA = 1 - math.exp(-5 / 60)


def test_meter_ticks_every_five_seconds_as_dropwizard() -> None:
    meter = EwmaMeter(T0)
    meter.mark(5000, T0)
    assert meter.one_minute_rate(T0 + 5000) == 0  # a tick needs strictly more than 5 s
    assert meter.one_minute_rate(T0 + 5001) == 1000  # first tick: the instant rate
    meter.mark(10_000, T0 + 6000)
    assert meter.one_minute_rate(T0 + 10_002) == pytest.approx(1000 + ALPHA * (2000 - 1000))
    later = meter.one_minute_rate(T0 + 60_002)
    assert later == pytest.approx((1000 + ALPHA * 1000) * (1 - ALPHA) ** 10)
    assert meter.count == 15_000


def test_meter_projection_matches_what_reads_will_show() -> None:
    meter = EwmaMeter(T0)
    meter.mark(50_000, T0 + 100)
    projected = meter.projected_rates(3)
    due = [meter.ticked_by_ms(ticks) for ticks in (1, 2, 3)]
    assert due == [T0 + 5001, T0 + 10_000, T0 + 15_000]
    # Reads move the tick phase (as in Dropwizard), so each time is read on its own copy.
    assert [meter.peek_one_minute_rate(t) for t in due] == projected


def test_default_share_of_topics_without_threshold() -> None:
    quota = TopicBytesInQuota(1000, T0)
    quota.set_topic_threshold("orders", 400)
    for topic in ("a", "b", "c"):
        quota.add_topic(topic)
    assert quota.threshold_for("orders") == 400
    assert quota.threshold_for("a") == 200
    quota.add_topic("d")
    assert quota.threshold_for("a") == 150
    quota.set_topic_threshold("orders", None)
    assert quota.threshold_for("orders") == 200


def test_change_whose_explicit_sum_exceeds_total_is_rejected() -> None:
    quota = TopicBytesInQuota(1000, T0)
    quota.set_topic_threshold("a", 600)
    with pytest.raises(ThresholdError, match="sum to 1100"):
        quota.set_topic_threshold("b", 500)
    assert quota.explicit_thresholds == {"a": 600}
    quota.set_topic_threshold("a", 1000)  # replacing its own value is fine
    with pytest.raises(ThresholdError, match="below the sum"):
        quota.set_total_threshold(900)
    with pytest.raises(ThresholdError):
        quota.set_topic_threshold("c", 0)


def _fill(quota: TopicBytesInQuota, topic: str, bytes_per_tick: int, ticks: int) -> int:
    """Push ``bytes_per_tick`` into ``topic`` for ``ticks`` ticks; returns the time after."""
    now = T0
    for _ in range(ticks):
        quota.record_accepted(topic, bytes_per_tick, now)
        now += 5000
    return now + 1


def test_refused_only_when_total_and_topic_are_both_over() -> None:
    quota = TopicBytesInQuota(1000, T0)
    quota.set_topic_threshold("hot", 500)
    quota.add_topic("cool")
    now = _fill(quota, "hot", 10_000, 3)  # 2000 B/s into "hot" only
    assert quota.total_meter.one_minute_rate(now) > 1000
    refusal = quota.check("hot", now)
    assert refusal is not None and refusal.topic_threshold == 500
    assert "refused" in str(refusal)
    assert not quota.record("hot", 100, now)
    assert quota.record("cool", 100, now)  # cool topic's own rate is under its share


def test_no_refusal_below_total_even_if_topic_is_over() -> None:
    quota = TopicBytesInQuota(100_000, T0)
    quota.set_topic_threshold("hot", 10)
    now = _fill(quota, "hot", 10_000, 3)
    assert quota.check("hot", now) is None


def test_no_total_threshold_never_refuses() -> None:
    quota = TopicBytesInQuota(None, T0)
    now = _fill(quota, "t", 10**9, 3)
    assert quota.check("t", now) is None
    assert quota.threshold_for("t") is None


def test_throttle_is_the_wait_until_a_rate_decays_under_its_threshold() -> None:
    def filled() -> tuple[TopicBytesInQuota, int]:
        quota = TopicBytesInQuota(1000, T0)
        return quota, _fill(quota, "hot", 10_000, 2)  # 2000 B/s

    quota, now = filled()
    wait = quota.throttle_ms("hot", now)
    assert wait > 0
    assert quota.check("hot", now + wait - 1) is not None
    quota, now = filled()  # checks tick the meters: the last one is asked of a twin
    assert quota.check("hot", now + wait) is None


def test_error_and_throttled_bytes_are_metered_apart() -> None:
    quota = TopicBytesInQuota(1000, T0)
    quota.record_error(5000, T0)
    quota.record_throttled(10_000, T0)
    assert quota.error_meter.one_minute_rate(T0 + 5001) == 1000
    assert quota.throttled_meter.one_minute_rate(T0 + 5001) == 2000
    assert quota.total_meter.one_minute_rate(T0 + 5001) == 0
