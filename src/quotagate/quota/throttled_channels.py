"""Throttled channels waiting for their mute to end (Kafka's delay queue and reaper), sans I/O.

The gateway registers a channel with its throttle, and asks at any time which channels are due;
the ``queue-size`` metric is a cumulative sum of +1 on register and -1 on release, as Kafka's.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from quotagate.quota.cumulative_sum import CumulativeSum
from quotagate.quota.metric_config import MetricConfig

ChannelT = TypeVar("ChannelT")

_NO_CONFIG = MetricConfig()


@dataclass(order=True, slots=True)
class _Entry(Generic[ChannelT]):
    end_ms: int
    seq: int
    channel: ChannelT = field(compare=False)


class ThrottledChannels(Generic[ChannelT]):
    __slots__ = ("_heap", "_queue_size", "_seq")

    def __init__(self) -> None:
        self._heap: list[_Entry[ChannelT]] = []
        self._seq = itertools.count()
        self._queue_size = CumulativeSum()

    def add(self, channel: ChannelT, throttle_ms: int, now_ms: int) -> None:
        if throttle_ms <= 0:
            return
        heapq.heappush(self._heap, _Entry(now_ms + throttle_ms, next(self._seq), channel))
        self._queue_size.record(_NO_CONFIG, 1, now_ms)

    def due(self, now_ms: int) -> list[ChannelT]:
        """Release every channel whose throttle has ended at ``now_ms`` (end time reached)."""
        released = []
        while self._heap and self._heap[0].end_ms <= now_ms:
            released.append(heapq.heappop(self._heap).channel)
            self._queue_size.record(_NO_CONFIG, -1, now_ms)
        return released

    def delays(self, now_ms: int) -> list[int]:
        """Remaining delay of every queued channel, in registration order."""
        return [entry.end_ms - now_ms for entry in sorted(self._heap, key=lambda e: e.seq)]

    def next_due_ms(self) -> int | None:
        return self._heap[0].end_ms if self._heap else None

    @property
    def queue_size(self) -> int:
        return int(self._queue_size.total)

    def __len__(self) -> int:
        return len(self._heap)
