"""Quota time per connection: when a request was read, nudged to keep the connection's order."""

from __future__ import annotations

from typing import Final

MAX_STAMP_SKEW_MS: Final = 1000
"""How far ahead of its read time a request's quota time may be nudged."""


class ConnectionStamps:
    """The ``now_ms`` every quota decision of a request uses (the usage event's ``ts_ms``).

    Two requests read in the same millisecond get consecutive ones, so a replay that orders
    usage events by ``ts_ms`` records a connection's requests in the gateway's order. A
    broker reads one request per connection at a time, so its own timestamps are spread the
    same way. Bursts are real: a client released from a mute sends its queued batches at once
    (hundreds within a millisecond). The nudge never exceeds ``MAX_STAMP_SKEW_MS`` (one
    default quota window): a connection sending more than a request per millisecond for long
    would otherwise drag its quota clock ahead of the wall clock without bound; past the
    bound the wall clock wins.
    """

    __slots__ = ("_last_ms",)

    def __init__(self) -> None:
        self._last_ms: dict[int, int] = {}

    def stamp(self, connection_id: int, received_ms: int) -> int:
        previous = self._last_ms.get(connection_id, 0)
        now_ms = received_ms
        if previous >= received_ms and previous + 1 - received_ms <= MAX_STAMP_SKEW_MS:
            now_ms = previous + 1
        self._last_ms[connection_id] = max(now_ms, previous)
        return now_ms

    def forget_before(self, wall_ms: int) -> None:
        """A connection's last stamp only matters while it is ahead of the clock."""
        self._last_ms = {c: ms for c, ms in self._last_ms.items() if ms >= wall_ms}
