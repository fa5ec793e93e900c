"""The gateway-wide budget for request bytes: Kafka's ``queued.max.request.bytes`` MemoryPool.

A connection reserves a frame's declared size (size prefix included) as soon as it has read
the 4-byte prefix, before buffering the frame, and releases it once the gateway no longer
holds the request (see :mod:`quotagate.gateway.connection`). Allocation is non-strict, as in
Kafka's ``SimpleMemoryPool`` used by the broker's ``SocketServer``: a reservation is granted
while any memory is left, so one frame larger than what remains is admitted (the pool then
goes below zero) instead of waiting for memory that may never come back. A refused connection
stops reading and waits; when released memory brings the pool above zero again the waiting
connections are told, oldest first, on the next turn of the event loop, each one retrying its
reservation before the next is told, until the pool is exhausted again.

Single-threaded: only the gateway's event loop touches a pool.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol

UNBOUNDED: Final = -1
"""``queued.max.request.bytes = -1``: account for bytes (the gauge) but never refuse."""
_NO_LIMIT: Final = 1 << 62


class MemoryWaiter(Protocol):
    def memory_available(self) -> None:
        """Memory was released: retry the reservation (and wait again if it fails)."""


class MemoryPool:
    __slots__ = ("_capacity", "_limit", "_used", "_waiters", "_wake_scheduled")

    def __init__(self, capacity: int = UNBOUNDED) -> None:
        if capacity != UNBOUNDED and capacity < 1:
            raise ValueError(f"capacity must be -1 (unbounded) or at least 1, got {capacity}")
        self._capacity = capacity
        self._limit = _NO_LIMIT if capacity == UNBOUNDED else capacity
        self._used = 0
        # An insertion-ordered dict as an ordered set: O(1) removal of a closed connection.
        self._waiters: dict[MemoryWaiter, None] = {}
        self._wake_scheduled = False

    @property
    def capacity(self) -> int:
        """Configured size in bytes; -1 when unbounded."""
        return self._capacity

    @property
    def used(self) -> int:
        """Bytes reserved now (may exceed the capacity: allocation is non-strict)."""
        return self._used

    @property
    def exhausted(self) -> bool:
        return self._used >= self._limit

    @property
    def waiting(self) -> int:
        """Connections waiting for memory."""
        return len(self._waiters)

    def try_allocate(self, size: int) -> bool:
        """Reserve ``size`` bytes if any memory is left; False when the pool is exhausted."""
        if self._used < self._limit:
            self._used += size
            return True
        return False

    def release(self, size: int) -> None:
        self._used -= size
        if self._waiters and self._used < self._limit and not self._wake_scheduled:
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def wait(self, waiter: MemoryWaiter) -> None:
        """Call ``waiter.memory_available()`` once memory is released (idempotent)."""
        self._waiters[waiter] = None

    def cancel(self, waiter: MemoryWaiter) -> None:
        self._waiters.pop(waiter, None)

    def _wake(self) -> None:
        # Called from the loop, never from inside another connection's processing: a
        # connection that releases memory is not re-entered by the one it wakes.
        self._wake_scheduled = False
        waiters = self._waiters
        while waiters and self._used < self._limit:
            waiter = next(iter(waiters))
            del waiters[waiter]
            waiter.memory_available()
