"""Invariants of the engine, checked by hypothesis over many generated histories."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from quotagate.quota import (
    DEFAULT,
    ClientQuotaManager,
    ExponentialBackoff,
    MetricConfig,
    Quota,
    Rate,
    TokenBucket,
)
from quotagate.quota.token_bucket import burst_of

T0 = 1_700_000_000_000

events = st.lists(
    st.tuples(st.integers(0, 5_000), st.floats(0, 1e6, allow_nan=False)), min_size=1, max_size=60
)


@given(events, st.floats(1, 1e6), st.sampled_from(["produce", "fetch", "request"]))
def test_a_violation_always_yields_a_throttle_of_at_least_zero(
    history: list[tuple[int, float]], quota: float, quota_type: str
) -> None:
    manager = ClientQuotaManager(quota_type)
    manager.update_quota(None, DEFAULT, quota)
    now = T0
    for gap, value in history:
        now += gap
        assert manager.record_and_get_throttle_ms("u", "c", value, now) >= 0


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.floats(-1e4, 1e4, allow_nan=False)), max_size=60),
    st.floats(0.01, 1e4),
    st.integers(1, 20),
)
def test_a_token_bucket_never_exceeds_its_burst(
    history: list[tuple[int, float]], quota: float, samples: int
) -> None:
    config = MetricConfig(samples=samples, time_window_ms=1000, quota=Quota.upper_bound(quota))
    bucket = TokenBucket()
    now = T0
    for gap, value in history:
        now += gap
        bucket.record(config, value, now)
        assert bucket.measure(config, now) <= burst_of(config)


@settings(max_examples=50)
@given(st.floats(1, 1e6), st.integers(2, 20), st.integers(100, 1000))
def test_a_constant_load_rate_converges_to_the_load(
    per_second: float, samples: int, step_ms: int
) -> None:
    # One sample is excluded: its window can be a single millisecond long, so a lone
    # sample's rate spikes by design (Kafka's Rate floors the window at 1 ms, not at W).
    config = MetricConfig(samples=samples, time_window_ms=1000)
    rate = Rate()
    now = T0
    per_event = per_second * step_ms / 1000
    for _ in range((samples + 3) * 1000 // step_ms + 1):
        rate.record(config, per_event, now)
        now += step_ms
    measured = rate.measure(config, now - step_ms)
    # The window spans E >= (S-1) s and holds E/step events give or take one, so the
    # rate is off by at most one event over E.
    slack = per_second * step_ms / (1000 * (samples - 1))
    assert abs(measured - per_second) <= slack * (1 + 1e-9)


@given(
    st.integers(0, 10_000),
    st.integers(0, 100_000),
    st.floats(0.0, 0.99),
    st.integers(0, 60),
    st.integers(0, 2**32),
)
def test_backoff_stays_within_eighty_percent_of_term_and_max(
    initial: int, maximum: int, jitter: float, attempts: int, seed: int
) -> None:
    backoff = ExponentialBackoff(initial, 2, maximum, jitter, rng=random.Random(seed))
    value = backoff.backoff(attempts)
    assert value <= max(maximum, 0)
    if initial >= maximum:
        assert value == min(initial, maximum)
    else:
        term = min(initial * 2.0**attempts, float(maximum))
        assert value >= int((1 - jitter) * term) - 1


@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=30), st.floats(1, 1e5))
def test_removing_and_re_adding_a_quota_keeps_history(values: list[int], quota: float) -> None:
    kept = ClientQuotaManager("produce")
    fresh = ClientQuotaManager("produce")
    for manager in (kept, fresh):
        manager.update_quota("alice", None, quota)
    now = T0
    for value in values:
        kept.record_and_get_throttle_ms("alice", "c", value, now)
        fresh.record_and_get_throttle_ms("alice", "c", value, now)
        now += 100
    kept.update_quota("alice", None, None)
    kept.update_quota("alice", None, quota)
    assert kept.record_and_get_throttle_ms("alice", "c", 1, now) == (
        fresh.record_and_get_throttle_ms("alice", "c", 1, now)
    )
    metric = kept.quota_metric("alice", "c")
    assert metric is not None and metric.measure(now) > 0
