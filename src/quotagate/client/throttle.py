"""KIP-219 on the client side: pausing a node after a throttled response (spec §6.3, §6.4).

Pure bookkeeping with time passed in; :mod:`quotagate.client.connection` applies it.
"""

from __future__ import annotations

from quotagate.protocol.api_table import client_self_throttles


class NodeThrottle:
    """``throttleUntil`` of one node: nothing is sent to it before that instant.

    It never moves backwards, so a short throttle arriving after a long one cannot cut the
    long one short.
    """

    __slots__ = ("until_ms",)

    def __init__(self) -> None:
        self.until_ms = 0.0

    def throttle(self, now_ms: float, throttle_ms: int) -> None:
        self.until_ms = max(self.until_ms, now_ms + throttle_ms)

    def remaining_ms(self, now_ms: float) -> float:
        return max(0.0, self.until_ms - now_ms)


def must_self_throttle(api_key: int, api_version: int, throttle_ms: int) -> bool:
    """Whether a response obliges the client to pause the node (§6.3: by API and version)."""
    return throttle_ms > 0 and client_self_throttles(api_key, api_version)


class InFlight:
    """One request awaiting its response; its timeout excludes time the node was throttled:
    expired iff ``(now - sent) - throttled > request.timeout.ms``."""

    __slots__ = ("api_key", "api_version", "sent_ms", "throttled_ms")

    def __init__(self, api_key: int, api_version: int, sent_ms: float) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.sent_ms = sent_ms
        self.throttled_ms = 0

    def add_throttle(self, throttle_ms: int) -> None:
        self.throttled_ms += throttle_ms

    def expires_at_ms(self, request_timeout_ms: int) -> float:
        return self.sent_ms + self.throttled_ms + request_timeout_ms

    def expired(self, now_ms: float, request_timeout_ms: int) -> bool:
        return (now_ms - self.sent_ms) - self.throttled_ms > request_timeout_ms
