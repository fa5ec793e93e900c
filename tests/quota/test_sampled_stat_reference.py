"""The windowed stats against a plain restatement of Kafka's ring, over random histories.

The engine keeps shortcuts beside its ring (a floor under the samples' last events, the
earliest start); these tests drive it and a reference without shortcuts through the same
records, measurements and purges, times going back as well as forth, and ask for bit-equal
answers after every step.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from quotagate.quota import Avg, Max, MetricConfig, Min, Rate, WindowedCount, WindowedSum
from quotagate.quota.java import DOUBLE_MAX, LONG_MAX, java_max, java_min
from quotagate.quota.rate import SimpleRate
from quotagate.quota.sampled_stat import SampledStat

T0 = 1_700_000_000_000


class _Sample:
    def __init__(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.count = 0
        self.start = now_ms
        self.last = now_ms


class _Reference:
    """Kafka >= 3.8's SampledStat as Java writes it: a list of sample objects, S+1 of them,
    purged by last event, the oldest by start; sums left to right."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        # Kafka's initial values: Max from -Infinity, Min from Double.MAX_VALUE.
        self.initial = {"max": -math.inf, "min": DOUBLE_MAX}.get(kind, 0.0)
        self.samples: list[_Sample] = []
        self.current = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        if not self.samples:
            self.samples.append(_Sample(self.initial, now_ms))
        sample = self.samples[self.current]
        if now_ms - sample.start >= config.time_window_ms or sample.count >= config.event_window:
            self.current = (self.current + 1) % (config.samples + 1)
            if self.current >= len(self.samples):
                self.samples.append(_Sample(self.initial, now_ms))
            sample = self.samples[self.current]
            self._reset(sample, now_ms)
        if self.kind == "max":
            sample.value = java_max(sample.value, value)
        elif self.kind == "min":
            sample.value = java_min(sample.value, value)
        elif self.kind == "count":
            sample.value += 1.0
        else:
            sample.value += value
        sample.count += 1
        sample.last = now_ms

    def _reset(self, sample: _Sample, now_ms: int) -> None:
        sample.value = self.initial
        sample.count = 0
        sample.start = now_ms
        sample.last = now_ms

    def purge(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        for sample in self.samples:
            if now_ms - sample.last >= expire_age:
                self._reset(sample, now_ms)

    def oldest_start(self, now_ms: int) -> int:
        if not self.samples:
            self.samples.append(_Sample(self.initial, now_ms))
        oldest = self.samples[0]
        for sample in self.samples[1:]:
            if sample.start < oldest.start:
                oldest = sample
        return oldest.start

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge(config, now_ms)
        total = 0.0
        for sample in self.samples:
            total += sample.value
        count = sum(sample.count for sample in self.samples)
        if self.kind in ("sum", "count"):
            return total
        if self.kind == "avg":
            return total / count if count else math.nan
        if not count:
            return math.nan
        # Kafka's loop over the ring with Math.max / Math.min (signed zeros, NaN).
        result = -math.inf if self.kind == "max" else DOUBLE_MAX
        for sample in self.samples:
            pick = java_max if self.kind == "max" else java_min
            result = pick(result, sample.value)
        return result


_STATS: dict[str, Callable[[], SampledStat]] = {
    "sum": WindowedSum,
    "count": WindowedCount,
    "avg": Avg,
    "max": Max,
    "min": Min,
}


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _assert_same_ring(stat: SampledStat, ref: _Reference) -> None:
    assert stat.values == [s.value for s in ref.samples]
    assert stat.counts == [s.count for s in ref.samples]
    assert stat.starts == [s.start for s in ref.samples]
    assert stat.lasts == [s.last for s in ref.samples]
    # The shortcuts' own invariants.
    if stat.lasts:
        assert stat._last_floor <= min(stat.lasts)
        if not stat._oldest_stale:
            assert stat._oldest_start == min(stat.starts)


# An operation: (what, time step, value). Steps go back as well as forth, mostly forth.
_operations = st.lists(
    st.tuples(
        st.sampled_from(["record", "record", "record", "measure", "oldest", "purge", "clone"]),
        st.one_of(st.integers(-1_500, 3_000), st.integers(0, 300)),
        st.sampled_from([0.0, 1.0, 0.1, 0.7, 1e16, -3.5, 1024.0]),
    ),
    max_size=120,
)
_configs = st.builds(
    MetricConfig,
    samples=st.integers(1, 5),
    time_window_ms=st.sampled_from([1, 7, 100, 1000]),
    event_window=st.sampled_from([1, 2, 3, LONG_MAX]),
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(_STATS)), _configs, _operations)
def test_a_sampled_stat_answers_as_the_reference_ring(
    kind: str, config: MetricConfig, operations: list[tuple[str, int, float]]
) -> None:
    stat, ref = _STATS[kind](), _Reference(kind)
    now = T0
    for what, step, value in operations:
        now += step
        if what == "record":
            stat.record(config, value, now)
            ref.record(config, value, now)
        elif what == "measure":
            assert _bits(stat.measure(config, now)) == _bits(ref.measure(config, now))
        elif what == "oldest":
            assert stat.oldest_start_ms(now) == ref.oldest_start(now)
        elif what == "purge":
            stat.purge_obsolete_samples(config, now)
            ref.purge(config, now)
        else:  # carry on with a copy: it must hold the shortcuts as they were
            clone = stat.clone()
            assert isinstance(clone, SampledStat)
            stat = clone
        _assert_same_ring(stat, ref)


@settings(max_examples=300, deadline=None)
@given(st.booleans(), _configs, _operations)
def test_a_rate_answers_as_over_the_reference_ring(
    simple: bool, config: MetricConfig, operations: list[tuple[str, int, float]]
) -> None:
    rate = SimpleRate() if simple else Rate()
    ref = _Reference("sum")
    now = T0
    for what, step, value in operations:
        now += step
        if what == "record":
            rate.record(config, value, now)
            ref.record(config, value, now)
        elif what in ("measure", "oldest"):
            total = ref.measure(config, now)
            window = rate._window_from(ref.oldest_start(now), config, now)
            assert _bits(rate.measure(config, now)) == _bits(total / (window / 1000.0))
            assert rate.window_size(config, now) == window
        elif what == "purge":
            rate.stat.purge_obsolete_samples(config, now)
            ref.purge(config, now)
        else:
            rate = rate.clone()
        _assert_same_ring(rate.stat, ref)
