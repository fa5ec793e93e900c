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

    A tenant's requests (issue 25) share its sensors across its connections, so they are
    spread the same way across the tenant: two members' requests read in the same
    millisecond get consecutive stamps in reading order, and the replay, which orders by
    ``ts_ms``, charges the tenant's sensors in the gateway's order (equal stamps of two
    connections it could only order by their names). Same bound.
    """

    __slots__ = ("_last_ms", "_tenant_last_ms")

    def __init__(self) -> None:
        self._last_ms: dict[int, int] = {}
        self._tenant_last_ms: dict[str, int] = {}

    def stamp(self, connection_id: int, received_ms: int, tenant: str = "") -> int:
        previous = self._last_ms.get(connection_id, 0)
        now_ms = _after(previous, received_ms, received_ms)
        if tenant:
            tenant_previous = self._tenant_last_ms.get(tenant, 0)
            now_ms = _after(tenant_previous, now_ms, received_ms)
            self._tenant_last_ms[tenant] = max(now_ms, tenant_previous)
        self._last_ms[connection_id] = max(now_ms, previous)
        return now_ms

    def forget_before(self, wall_ms: int) -> None:
        """A connection's (a tenant's) last stamp only matters while it is ahead of the clock."""
        self._last_ms = {c: ms for c, ms in self._last_ms.items() if ms >= wall_ms}
        self._tenant_last_ms = {t: ms for t, ms in self._tenant_last_ms.items() if ms >= wall_ms}


def _after(previous: int, now_ms: int, received_ms: int) -> int:
    """``now_ms``, or the millisecond after ``previous`` when that is not later and the
    nudge stays within ``MAX_STAMP_SKEW_MS`` of the read time."""
    if previous >= now_ms and previous + 1 - received_ms <= MAX_STAMP_SKEW_MS:
        return previous + 1
    return now_ms
