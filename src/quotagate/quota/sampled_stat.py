"""Windowed stats over a ring of samples, with Kafka >= 3.8 semantics.

The ring holds up to S+1 samples. A sample is purged once its *last event* is S windows old,
so a sample that started before the monitored window but saw events inside it still counts;
the oldest sample is the one with the earliest *start*. Measuring purges (and may create a
sample), exactly like Kafka: reading a metric can move sample start times, and the replay
pipeline must see the same numbers the gateway saw.

A sample is an object, as in Kafka, made once and reset in place: compiled, its four numbers
are machine numbers in one small object, so a record allocates nothing and a pass over the
ring reads a dozen adjacent objects instead of three dozen boxed numbers. Two numbers spare
the quota check a pass over the ring on most requests: a floor under every sample's last
event (``now - floor < S windows`` means nothing is obsolete, and only when that fails is the
ring scanned, exactly as Kafka's loop does), and the earliest start, kept exact and
recomputed only after the sample that held it was reset.
"""

from __future__ import annotations

import math

from mypy_extensions import mypyc_attr

from quotagate.quota.java import DOUBLE_MAX, java_max, java_min
from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.stat import Stat

# Sums add left to right in doubles, as Java's loop does (CPython's builtin sum compensates
# rounding from 3.12). Over sample objects, plain loops are also the fastest interpreted:
# builtin sum or min over ``attrgetter`` cost more than the loop.


class Sample:
    """One window of a stat: its value, event count, start and last event (epoch ms)."""

    __slots__ = ("count", "last", "start", "value")

    def __init__(self, value: float, now_ms: int) -> None:
        self.value = value
        self.count = 0
        self.start = now_ms
        self.last = now_ms

    def reset(self, value: float, now_ms: int) -> None:
        self.value = value
        self.count = 0
        self.start = now_ms
        self.last = now_ms

    def copy(self) -> Sample:
        twin = Sample(self.value, self.start)
        twin.count = self.count
        twin.last = self.last
        return twin


def _java_sum(samples: list[Sample]) -> float:
    total = 0.0
    for sample in samples:
        total += sample.value
    return total


def _earliest_start(samples: list[Sample]) -> int:
    earliest = samples[0].start
    for sample in samples:
        if sample.start < earliest:  # noqa: PLR1730 - min() is a call per sample, interpreted
            earliest = sample.start
    return earliest


def _event_count(samples: list[Sample]) -> int:
    count = 0
    for sample in samples:
        count += sample.count
    return count


@mypyc_attr(allow_interpreted_subclasses=True)  # Kafka's SampledStat is an extension point
class SampledStat(Stat):
    """Base of the windowed stats; subclasses say how a sample absorbs a value and how
    samples combine (``_combine`` reads ``samples``, or the ``values`` / ``counts`` lists)."""

    __slots__ = (
        "_current",
        "_initial",
        "_last_floor",
        "_oldest_stale",
        "_oldest_start",
        "samples",
    )

    def __init__(self, initial: float = 0.0) -> None:
        self._initial = initial
        self.samples: list[Sample] = []  # in Kafka's order: sums run over it front to back
        self._current = 0
        # At most every sample's last event (while there are samples): lowered with every
        # write of a last event, made exact by every purge scan.
        self._last_floor = 0
        # The earliest start unless _oldest_stale: a reset that raised it stales it.
        self._oldest_start = 0
        self._oldest_stale = True

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        samples = self.samples
        if not samples:
            self._append(now_ms)
        sample = samples[self._current]
        if now_ms - sample.start >= config.time_window_ms or sample.count >= config.event_window:
            sample = samples[self._advance(config, now_ms)]
        sample.value = self._update(sample.value, value)
        sample.count += 1
        sample.last = now_ms
        if now_ms < self._last_floor:  # noqa: PLR1730 - min() is a call per record, interpreted
            self._last_floor = now_ms

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self._combine()

    def oldest_start_ms(self, now_ms: int) -> int:
        """Start of the sample that started first (creating one at ``now_ms`` if none)."""
        if not self.samples:
            self._append(now_ms)
        if self._oldest_stale:
            self._oldest_start = _earliest_start(self.samples)
            self._oldest_stale = False
        return self._oldest_start

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        samples = self.samples
        # The floor is at most every last event: when it is recent, so are they all.
        if not samples or now_ms - self._last_floor < expire_age:
            return
        # Kafka's loop, which also makes the floor and the earliest start exact again,
        # starting from the first sample as the loop leaves it.
        # now - last >= expire_age, with the subtraction taken once (ints do not overflow).
        obsolete_from = now_ms - expire_age
        first = samples[0]
        if first.last <= obsolete_from:
            floor = oldest = now_ms
        else:
            floor, oldest = first.last, first.start
        initial = self._initial
        for sample in samples:  # each attribute read once: interpreted, reads cost
            last = sample.last
            if last <= obsolete_from:
                sample.reset(initial, now_ms)
                last = now_ms
            if last < floor:  # noqa: PLR1730 - as in _earliest_start
                floor = last
            start = sample.start
            if start < oldest:  # noqa: PLR1730
                oldest = start
        self._last_floor = floor
        self._oldest_start = oldest
        self._oldest_stale = False

    def clone(self) -> SampledStat:
        twin = type(self)()  # stats are built without arguments; the state is copied below
        twin._initial = self._initial
        twin.samples = [sample.copy() for sample in self.samples]
        twin._current = self._current
        twin._last_floor = self._last_floor
        twin._oldest_start = self._oldest_start
        twin._oldest_stale = self._oldest_stale
        return twin

    @property
    def values(self) -> list[float]:
        """The samples' values, in ring order (a copy)."""
        return [sample.value for sample in self.samples]

    @property
    def counts(self) -> list[int]:
        """The samples' event counts, in ring order (a copy)."""
        return [sample.count for sample in self.samples]

    @property
    def starts(self) -> list[int]:
        """The samples' start times, in ring order (a copy)."""
        return [sample.start for sample in self.samples]

    @property
    def lasts(self) -> list[int]:
        """The samples' last-event times, in ring order (a copy)."""
        return [sample.last for sample in self.samples]

    @property
    def live_samples(self) -> int:
        """Samples holding at least one event."""
        return sum(1 for sample in self.samples if sample.count > 0)

    def _append(self, now_ms: int) -> int:
        if not self.samples:
            self._last_floor = now_ms
            self._oldest_start = now_ms
            self._oldest_stale = False
        else:
            self._last_floor = min(self._last_floor, now_ms)
            self._oldest_start = min(self._oldest_start, now_ms)  # harmless when stale
        self.samples.append(Sample(self._initial, now_ms))
        return len(self.samples) - 1

    def _advance(self, config: MetricConfig, now_ms: int) -> int:
        i = self._current = (self._current + 1) % (config.samples + 1)
        if i >= len(self.samples):
            return self._append(now_ms)
        sample = self.samples[i]
        old_start = sample.start
        sample.reset(self._initial, now_ms)
        if now_ms < self._last_floor:  # noqa: PLR1730 - as in record
            self._last_floor = now_ms
        if not self._oldest_stale:
            if now_ms <= self._oldest_start:
                self._oldest_start = now_ms
            elif old_start == self._oldest_start:
                self._oldest_stale = True  # the earliest start may have been this one
        return i

    def _update(self, current: float, value: float) -> float:
        raise NotImplementedError

    def _combine(self) -> float:
        raise NotImplementedError


class WindowedSum(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, current: float, value: float) -> float:
        return current + value

    def _combine(self) -> float:
        return _java_sum(self.samples)


class WindowedCount(WindowedSum):
    """Counts events; the recorded value is ignored."""

    __slots__ = ()

    def _update(self, current: float, value: float) -> float:
        return current + 1.0


class Avg(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, current: float, value: float) -> float:
        return current + value

    def _combine(self) -> float:
        count = _event_count(self.samples)
        if not count:
            return math.nan
        return _java_sum(self.samples) / count


class Max(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(-math.inf)

    def _update(self, current: float, value: float) -> float:
        return java_max(current, value)

    def _combine(self) -> float:
        # Kafka's loop: Math.max from -Infinity over every sample, in ring order.
        result = -math.inf
        for sample in self.samples:
            result = java_max(result, sample.value)
        return result if _event_count(self.samples) else math.nan


class Min(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        # Kafka's Min starts its samples at Double.MAX_VALUE, not +Infinity.
        super().__init__(DOUBLE_MAX)

    def _update(self, current: float, value: float) -> float:
        return java_min(current, value)

    def _combine(self) -> float:
        # Kafka's loop: Math.min from Double.MAX_VALUE over every sample, in ring order.
        result = DOUBLE_MAX
        for sample in self.samples:
            result = java_min(result, sample.value)
        return result if _event_count(self.samples) else math.nan
