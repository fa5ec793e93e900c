"""Spec §9.1: Rate and SampledStat vectors, numbers exact."""

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
from quotagate.quota.sampled_stat import SampledStat

T0 = 1_700_000_000_000


@pytest.mark.parametrize(
    ("samples", "window_s", "window_size", "rate"),
    [
        (1, 1, 999, 50 / 0.999),
        (1, 11, 10999, 4.545868),
        (11, 1, 10999, 4.545868),
        (11, 11, 120999, 0.413227),
    ],
)
def test_rate_with_no_prior_samples(
    samples: int, window_s: int, window_size: int, rate: float
) -> None:
    config = MetricConfig(samples=samples, time_window_ms=window_s * 1000)
    stat = Rate()
    stat.record(config, 50, T0)
    now = T0 + window_s * 1000 - 1
    assert stat.window_size(config, now) == window_size
    assert stat.measure(config, now) == pytest.approx(rate, abs=1e-6)


def test_rate_is_consistent_after_the_first_window() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000)
    stat = Rate()
    now = T0
    steps = [0] + [99] + [100] * 9
    for step in steps:
        now += step
        stat.record(config, 1, now)
    now += 101
    expected = [
        10.909,
        10.842,
        10.778,
        10.722,
        10.674,
        10.632,
        10.595,
        10.561,
        10.532,
        10.505,
        10.481,
    ]
    measured = []
    for step in steps:
        now += step
        stat.record(config, 1, now)
        value = stat.measure(config, now)
        assert stat.measure(config, now) == value  # measuring twice changes nothing
        measured.append(value)
    assert all(10 <= v <= 11 for v in measured)
    assert measured == pytest.approx(expected, abs=1e-3)


class _LiveSamples(SampledStat):
    """Measures the number of samples that have not been reset."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, current: float, value: float) -> float:
        return current + value

    def _combine(self) -> float:
        return float(self.live_samples)


def _complete_sample(stat: _LiveSamples, config: MetricConfig, now: int) -> int:
    stat.record(config, 1, now)
    stat.record(config, 1, now + 999)
    return now + 1000


@pytest.mark.parametrize(("wait", "alive"), [(2500, 0), (1500, 1)])
def test_sampled_stat_purges_by_last_event(wait: int, alive: int) -> None:
    config = MetricConfig(samples=2, time_window_ms=1000)
    stat = _LiveSamples()
    now = _complete_sample(stat, config, T0)
    assert stat.measure(config, now + wait) == alive


def test_sampled_stat_keeps_s_plus_one_samples() -> None:
    config = MetricConfig(samples=2, time_window_ms=1000)
    stat = _LiveSamples()
    now = _complete_sample(stat, config, T0)
    now = _complete_sample(stat, config, now + 100)
    now += 100
    stat.record(config, 1, now)
    assert stat.measure(config, now) == 3


def test_time_windowing() -> None:
    config = MetricConfig(samples=2, time_window_ms=1)
    count = WindowedCount()
    count.record(config, 1, 0)
    count.record(config, 1, 1)
    assert count.measure(config, 1) == 2
    count.record(config, 1, 2)
    assert count.measure(config, 2) == 2


def test_old_data_has_no_effect() -> None:
    config = MetricConfig(samples=2, time_window_ms=100)
    stats = {
        "max": Max(),
        "min": Min(),
        "avg": Avg(),
        "count": WindowedCount(),
        "sum": WindowedSum(),
    }
    for stat in stats.values():
        stat.record(config, 50, T0)
    for name in ("max", "min", "avg"):
        assert math.isnan(stats[name].measure(config, T0 + 200))
    assert stats["count"].measure(config, T0 + 200) == 0
    assert stats["sum"].measure(config, T0 + 200) == 0


def test_rate_windowing() -> None:
    config = MetricConfig(samples=3, time_window_ms=30_000)
    rate, count_rate, total = Rate(), Rate(WindowedCount()), CumulativeSum()
    for t in (0, 30_000):
        for stat in (rate, count_rate, total):
            stat.record(config, 100, T0 + t)
    now = T0 + 75_000
    assert rate.window_size(config, now) == 75_000
    assert rate.measure(config, now) == pytest.approx(200 / 75)
    assert count_rate.measure(config, now) == pytest.approx(2 / 75)
    assert rate.measure(config, T0 + 165_000) == 0
    assert count_rate.measure(config, T0 + 165_000) == 0
    assert total.measure(config, T0 + 165_000) == 200


def test_simple_stats() -> None:
    config = MetricConfig()
    sum_rate, count_rate = Rate(), Rate(WindowedCount())
    avg, mx, mn, count = Avg(), Max(), Min(), WindowedCount()
    for value in range(10):
        for stat in (sum_rate, count_rate, avg, mx, mn, count):
            stat.record(config, value, T0)
    assert count_rate.measure(config, T0) == pytest.approx(10 / 30)
    now = T0 + 2000
    assert sum_rate.measure(config, now) == pytest.approx(45 / 32)
    assert count_rate.measure(config, now) == pytest.approx(10 / 32)
    assert avg.measure(config, now) == 4.5
    assert mx.measure(config, now) == 9
    assert mn.measure(config, now) == 0
    assert count.measure(config, now) == 10


def test_cumulative_sum_quotas_keep_the_violating_value() -> None:
    sensor = Sensor("test.sensor")
    total = CumulativeSum()
    sensor.add("test.total", total, MetricConfig(quota=Quota.upper_bound(5)))
    sensor.record(5, T0)
    with pytest.raises(QuotaViolation):
        sensor.record(1, T0)
    assert total.total == 6

    lower = Sensor("lower")
    lower_total = CumulativeSum()
    lower.add("lower.total", lower_total, MetricConfig(quota=Quota.lower_bound(0)))
    lower.record(6, T0)
    lower.record(-6, T0)
    with pytest.raises(QuotaViolation):
        lower.record(-1, T0)


def test_simple_rate() -> None:
    config = MetricConfig(samples=10, time_window_ms=1000)
    rate = SimpleRate()
    rate.record(config, 1000, T0)
    for offset in (0, 100, 200, 400, 1000):
        assert rate.measure(config, T0 + offset) == pytest.approx(1000)
    assert rate.measure(config, T0 + 1200) == pytest.approx(1000 / 1.2)
    assert rate.measure(config, T0 + 1400) == pytest.approx(1000 / 1.4)
    rate.record(config, 1000, T0 + 1400)
    assert rate.measure(config, T0 + 1400) == pytest.approx(2000 / 1.4)
    assert rate.measure(config, T0 + 2500) == pytest.approx(2000 / 2.5)
    rate.record(config, 1000, T0 + 2500)
    assert rate.measure(config, T0 + 2500) == pytest.approx(3000 / 2.5)
    assert rate.measure(config, T0 + 9000) == pytest.approx(3000 / 9)
    rate.record(config, 1000, T0 + 9000)
    assert rate.measure(config, T0 + 9000) == pytest.approx(4000 / 9)
    assert rate.measure(config, T0 + 10_500) == pytest.approx(3000 / 9.1)
    rate.record(config, 1000, T0 + 10_500)
    assert rate.measure(config, T0 + 10_500) == pytest.approx(4000 / 9.1)
