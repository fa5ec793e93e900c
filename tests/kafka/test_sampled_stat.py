"""Kafka's ``SampledStatTest`` (clients, ``org.apache.kafka.common.metrics.stats``) as vectors.

The stat under test measures how many samples are alive: each record marks its sample 1,
and combining sums the marks. Two samples of 1 s: a monitored window of 2 s.
"""

from __future__ import annotations

from quotagate.quota import MetricConfig
from quotagate.quota.sampled_stat import SampledStat

T0 = 1_700_000_000_000
CONFIG = MetricConfig(samples=2, time_window_ms=1000)


class _SampleCount(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, current: float, value: float) -> float:
        return 1.0

    def _combine(self) -> float:
        return sum(self.values)


def _complete_sample(stat: SampledStat, now: int) -> int:
    """Events at a sample's start and end; returns the time just after its window."""
    stat.record(CONFIG, 1, now)
    now += CONFIG.time_window_ms - 1
    stat.record(CONFIG, 1, now)
    return now + 1


def test_sample_is_purged_if_doesnt_overlap() -> None:
    """SampledStatTest.testSampleIsPurgedIfDoesntOverlap"""
    stat = _SampleCount()
    now = _complete_sample(stat, T0) + 2500
    assert stat.measure(CONFIG, now) == 0


def test_sample_is_kept_if_overlaps() -> None:
    """SampledStatTest.testSampleIsKeptIfOverlaps: its last event is inside the window."""
    stat = _SampleCount()
    now = _complete_sample(stat, T0) + 1500
    assert stat.measure(CONFIG, now) == 1


def test_sample_is_kept_if_overlaps_and_extra() -> None:
    """SampledStatTest.testSampleIsKeptIfOverlapsAndExtra: S+1 samples alive at 2.2 s."""
    stat = _SampleCount()
    now = _complete_sample(stat, T0) + 100
    now = _complete_sample(stat, now) + 100
    stat.record(CONFIG, 1, now)
    assert stat.measure(CONFIG, now) == 3
