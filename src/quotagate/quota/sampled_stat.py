"""Windowed stats over a ring of samples, with Kafka >= 3.8 semantics.

The ring holds up to S+1 samples. A sample is purged once its *last event* is S windows old,
so a sample that started before the monitored window but saw events inside it still counts;
the oldest sample is the one with the earliest *start*. Measuring purges (and may create a
sample), exactly like Kafka: reading a metric can move sample start times, and the replay
pipeline must see the same numbers the gateway saw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from quotagate.quota.metric_config import MetricConfig


class Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def is_complete(self, now_ms: int, config: MetricConfig) -> bool:
        return (
            now_ms - self.start_ms >= config.time_window_ms
            or self.event_count >= config.event_window
        )

    def __repr__(self) -> str:
        return (
            f"Sample(value={self.value}, events={self.event_count}, "
            f"start={self.start_ms}, last={self.last_event_ms})"
        )


class SampledStat:
    """Base of the windowed stats; subclasses say how a sample absorbs a value and how
    samples combine."""

    __slots__ = ("_current", "_initial", "samples")

    def __init__(self, initial: float) -> None:
        self._initial = initial
        self.samples: list[Sample] = []
        self._current = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        sample = self.current(now_ms)
        if sample.is_complete(now_ms, config):
            sample = self._advance(config, now_ms)
        self._update(sample, value)
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self._combine(self.samples)

    def current(self, now_ms: int) -> Sample:
        if not self.samples:
            self.samples.append(Sample(self._initial, now_ms))
        return self.samples[self._current]

    def oldest(self, now_ms: int) -> Sample:
        if not self.samples:
            self.samples.append(Sample(self._initial, now_ms))
        oldest = self.samples[0]
        for sample in self.samples:
            if sample.start_ms < oldest.start_ms:
                oldest = sample
        return oldest

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        for sample in self.samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(self._initial, now_ms)

    def _advance(self, config: MetricConfig, now_ms: int) -> Sample:
        self._current = (self._current + 1) % (config.samples + 1)
        if self._current >= len(self.samples):
            sample = Sample(self._initial, now_ms)
            self.samples.append(sample)
            return sample
        sample = self.samples[self._current]
        sample.reset(self._initial, now_ms)
        return sample

    def _update(self, sample: Sample, value: float) -> None:
        raise NotImplementedError

    def _combine(self, samples: Sequence[Sample]) -> float:
        raise NotImplementedError


class WindowedSum(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, sample: Sample, value: float) -> None:
        sample.value += value

    def _combine(self, samples: Sequence[Sample]) -> float:
        total = 0.0
        for sample in samples:
            total += sample.value
        return total


class WindowedCount(WindowedSum):
    """Counts events; the recorded value is ignored."""

    __slots__ = ()

    def _update(self, sample: Sample, value: float) -> None:
        sample.value += 1.0


class Avg(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def _update(self, sample: Sample, value: float) -> None:
        sample.value += value

    def _combine(self, samples: Sequence[Sample]) -> float:
        total = 0.0
        count = 0
        for sample in samples:
            total += sample.value
            count += sample.event_count
        return total / count if count else math.nan


class Max(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(-math.inf)

    def _update(self, sample: Sample, value: float) -> None:
        sample.value = max(sample.value, value)

    def _combine(self, samples: Sequence[Sample]) -> float:
        count = sum(sample.event_count for sample in samples)
        return max(sample.value for sample in samples) if count else math.nan


class Min(SampledStat):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(math.inf)

    def _update(self, sample: Sample, value: float) -> None:
        sample.value = min(sample.value, value)

    def _combine(self, samples: Sequence[Sample]) -> float:
        count = sum(sample.event_count for sample in samples)
        return min(sample.value for sample in samples) if count else math.nan
