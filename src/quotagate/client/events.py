"""Hooks for watching what the client does on the network (benchmarks, tests, metrics)."""

from __future__ import annotations


class ClientEvents:
    """Override what you need; every hook gets the node id and the client clock's now."""

    def connect_attempt(self, node_id: int, now_ms: float) -> None:
        """A TCP connect to the node is starting."""

    def connect_failed(self, node_id: int, now_ms: float, backoff_ms: int) -> None:
        """The connect failed; the next one is allowed after ``backoff_ms``."""

    def connected(self, node_id: int, now_ms: float) -> None:
        """Connected and ApiVersions negotiated: the node is ready."""

    def request_sent(self, node_id: int, api_key: int, api_version: int, now_ms: float) -> None:
        """A request was written to the node."""

    def throttled(self, node_id: int, now_ms: float, throttle_ms: int) -> None:
        """A response obliged the client to pause the node (KIP-219)."""
