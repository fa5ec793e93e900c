"""Throttled channels waiting for their mute to end (Kafka's delay queue and reaper), sans I/O.

The gateway registers a channel with its throttle, and asks at any time which channels are due;
the ``queue-size`` metric is a cumulative sum of +1 on register and -1 on release, as Kafka's.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

from quotagate.quota.cumulative_sum import CumulativeSum
from quotagate.quota.metric_config import MetricConfig

ChannelT = TypeVar("ChannelT")

_NO_CONFIG = MetricConfig()


class ThrottledChannels(Generic[ChannelT]):
    __slots__ = ("_heap", "_queue_size", "_seq")

    def __init__(self) -> None:
        # (end time, registration order, channel): the order breaks ties so that channels
        # themselves never need to be comparable.
        self._heap: list[tuple[int, int, ChannelT]] = []
        self._seq = itertools.count()
        self._queue_size = CumulativeSum()

    def add(self, channel: ChannelT, throttle_ms: int, now_ms: int) -> None:
        if throttle_ms <= 0:
            return
        heapq.heappush(self._heap, (now_ms + throttle_ms, next(self._seq), channel))
        self._queue_size.record(_NO_CONFIG, 1, now_ms)

    def due(self, now_ms: int) -> list[ChannelT]:
        """Release every channel whose throttle has ended at ``now_ms`` (end time reached)."""
        released = []
        while self._heap and self._heap[0][0] <= now_ms:
            released.append(heapq.heappop(self._heap)[2])
            self._queue_size.record(_NO_CONFIG, -1, now_ms)
        return released

    def delays(self, now_ms: int) -> list[int]:
        """Remaining delay of every queued channel, in registration order."""
        return [end - now_ms for end, _, _ in sorted(self._heap, key=lambda entry: entry[1])]

    def next_due_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    @property
    def queue_size(self) -> int:
        return int(self._queue_size.total)

    def __len__(self) -> int:
        return len(self._heap)
