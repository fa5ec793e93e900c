"""Kafka's ``RateTest`` (clients, ``org.apache.kafka.common.metrics.stats``) as vectors."""

from __future__ import annotations

import pytest

from quotagate.quota import MetricConfig, Rate

T0 = 1_700_000_000_000


@pytest.mark.parametrize(("samples", "window_s"), [(1, 1), (1, 11), (11, 1), (11, 11)])
def test_rate_with_no_prior_available_samples(samples: int, window_s: int) -> None:
    """RateTest.testRateWithNoPriorAvailableSamples: missing history counts as S-1 empty
    windows, so 50 recorded at the start and measured 1 ms before the window ends is
    50 / ((W - 1 ms) + (S - 1) * W)."""
    config = MetricConfig(samples=samples, time_window_ms=window_s * 1000)
    rate = Rate()
    rate.record(config, 50.0, T0)
    measured_after_ms = window_s * 1000 - 1
    observed = rate.measure(config, T0 + measured_after_ms)
    window = measured_after_ms / 1000 + (samples - 1) * window_s
    assert observed == pytest.approx(50.0 / window, abs=1e-6)


def test_rate_is_consistent_after_the_first_window() -> None:
    """RateTest.testRateIsConsistentAfterTheFirstWindow: one event about every 100 ms reads
    10 to 11 per second from the second window on, and a second reading at the same instant
    gives the same value (measuring purges, but not twice)."""
    config = MetricConfig(samples=2, time_window_ms=1000)
    steps = [0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    rate = Rate()
    now = T0
    for step in steps:
        now += step
        rate.record(config, 1, now)
    now += 101
    for step in steps:
        now += step
        rate.record(config, 1, now)
        observed = rate.measure(config, now)
        assert 10 <= observed <= 11
        assert rate.measure(config, now) == observed
