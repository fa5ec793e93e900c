"""Windowed stats over a ring of samples, with Kafka >= 3.8 semantics.

The ring holds up to S+1 samples. A sample is purged once its *last event* is S windows old,
so a sample that started before the monitored window but saw events inside it still counts;
the oldest sample is the one with the earliest *start*. Measuring purges (and may create a
sample), exactly like Kafka: reading a metric can move sample start times, and the replay
pipeline must see the same numbers the gateway saw.

Samples are kept as four parallel lists (value, event count, start, last event) rather than
objects. Two numbers spare the quota check a pass over the ring on most requests: a floor
under every sample's last event (``now - floor < S windows`` means nothing is obsolete, and
only when that fails is the ring scanned, exactly as Kafka's loop does), and the earliest
start, kept exact and recomputed only after the sample that held it was reset.
"""

from __future__ import annotations

import math
import sys
from typing import Final

from mypy_extensions import mypyc_attr

from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.stat import Stat

# Compiled (an extension, not this source), loops over the ring add and compare machine
# numbers, where builtin sum and min handle Python objects (min over the ring, twice per
# record, was a fifth of a record's time); interpreted, the builtins are faster.
_COMPILED: Final = not __file__.endswith(".py")

# Sums must add left to right in doubles, as Java's loop does. CPython's builtin sum did
# exactly that from a float start until 3.12, which compensates rounding: before 3.12 the
# C loop is used when interpreted (every quota check measures a sum), from 3.12 the loop.
_BUILTIN_SUM_IS_JAVAS: Final = sys.version_info < (3, 12)


def _java_sum(values: list[float]) -> float:
    if _BUILTIN_SUM_IS_JAVAS and not _COMPILED:
        return sum(values, 0.0)
    total = 0.0
    for value in values:
        total += value
    return total


def _earliest(times: list[int]) -> int:
    if not _COMPILED:
        return min(times)
    earliest = times[0]
    for time in times:
        earliest = min(earliest, time)
    return earliest


@mypyc_attr(allow_interpreted_subclasses=True)  # Kafka's SampledStat is an extension point
class SampledStat(Stat):
    """Base of the windowed stats; subclasses say how a sample absorbs a value and how
    samples combine."""

    __slots__ = (
        "_current",
        "_initial",
        "_last_floor",
        "_oldest_stale",
        "_oldest_start",
        "counts",
        "lasts",
        "starts",
        "values",
    )

    def __init__(self, initial: float = 0.0) -> None:
        self._initial = initial
        self.values: list[float] = []
        self.counts: list[int] = []
        self.starts: list[int] = []
        self.lasts: list[int] = []
        self._current = 0
        # At most min(lasts) (while there are samples): lowered with every write of a last
        # event, made exact by every purge scan.
        self._last_floor = 0
        # min(starts) unless _oldest_stale: a reset that raised the earliest start stales it.
        self._oldest_start = 0
        self._oldest_stale = True

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        if not self.values:
            self._append(now_ms)
        i = self._current
        if (
            now_ms - self.starts[i] >= config.time_window_ms
            or self.counts[i] >= config.event_window
        ):
            i = self._advance(config, now_ms)
        self.values[i] = self._update(self.values[i], value)
        self.counts[i] += 1
        self.lasts[i] = now_ms
        if now_ms < self._last_floor:  # noqa: PLR1730 - min() is a call per record, interpreted
            self._last_floor = now_ms

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self._combine()

    def oldest_start_ms(self, now_ms: int) -> int:
        """Start of the sample that started first (creating one at ``now_ms`` if none)."""
        if not self.starts:
            self._append(now_ms)
        if self._oldest_stale:
            self._oldest_start = _earliest(self.starts)
            self._oldest_stale = False
        return self._oldest_start

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        lasts = self.lasts
        # The floor is at most every last event: when it is recent, so are they all.
        if not lasts or now_ms - self._last_floor < expire_age:
            return
        for i, last in enumerate(lasts):  # Kafka's loop
            if now_ms - last >= expire_age:
                self._reset(i, now_ms)
        # The ring was just read, so making both numbers exact again costs little.
        self._last_floor = _earliest(lasts)
        self._oldest_start = _earliest(self.starts)
        self._oldest_stale = False

    def clone(self) -> SampledStat:
        twin = type(self)()  # stats are built without arguments; the state is copied below
        twin._initial = self._initial
        twin.values = list(self.values)
        twin.counts = list(self.counts)
        twin.starts = list(self.starts)
        twin.lasts = list(self.lasts)
        twin._current = self._current
        twin._last_floor = self._last_floor
        twin._oldest_start = self._oldest_start
        twin._oldest_stale = self._oldest_stale
        return twin

    @property
    def live_samples(self) -> int:
        """Samples holding at least one event."""
        return sum(1 for count in self.counts if count > 0)

    def _append(self, now_ms: int) -> int:
        if not self.values:
            self._last_floor = now_ms
            self._oldest_start = now_ms
            self._oldest_stale = False
        else:
            self._last_floor = min(self._last_floor, now_ms)
            self._oldest_start = min(self._oldest_start, now_ms)  # harmless when stale
        self.values.append(self._initial)
        self.counts.append(0)
        self.starts.append(now_ms)
        self.lasts.append(now_ms)
        return len(self.values) - 1

    def _reset(self, i: int, now_ms: int) -> None:
        """Start sample ``i`` afresh; the caller keeps the floor and the earliest start."""
        self.values[i] = self._initial
        self.counts[i] = 0
        self.starts[i] = now_ms
        self.lasts[i] = now_ms

    def _advance(self, config: MetricConfig, now_ms: int) -> int:
        i = self._current = (self._current + 1) % (config.samples + 1)
        if i >= len(self.values):
            return self._append(now_ms)
        old_start = self.starts[i]
        self._reset(i, now_ms)
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

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        # The base record with the update inlined: this runs on every produce and fetch.
        values = self.values
        if not values:
            self._append(now_ms)
        i = self._current
        if (
            now_ms - self.starts[i] >= config.time_window_ms
            or self.counts[i] >= config.event_window
        ):
            i = self._advance(config, now_ms)
        values[i] += value
        self.counts[i] += 1
        self.lasts[i] = now_ms
        if now_ms < self._last_floor:  # noqa: PLR1730 - min() is a call per record, interpreted
            self._last_floor = now_ms

    def _update(self, current: float, value: float) -> float:
        return current + value

    def _combine(self) -> float:
        return _java_sum(self.values)


class WindowedCount(WindowedSum):
    """Counts events; the recorded value is ignored."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        SampledStat.record(self, config, value, now_ms)  # not WindowedSum's: it adds the value

    def _update(self, current: float, value: float) -> float:
        return current + 1.0


class Avg(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, current: float, value: float) -> float:
        return current + value

    def _combine(self) -> float:
        count = sum(self.counts)
        if not count:
            return math.nan
        return _java_sum(self.values) / count


class Max(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(-math.inf)

    def _update(self, current: float, value: float) -> float:
        return max(current, value)

    def _combine(self) -> float:
        return max(self.values) if sum(self.counts) else math.nan


class Min(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(math.inf)

    def _update(self, current: float, value: float) -> float:
        return min(current, value)

    def _combine(self) -> float:
        return min(self.values) if sum(self.counts) else math.nan
