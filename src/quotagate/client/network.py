"""Connections to broker nodes, gated the way Kafka's ``NetworkClient`` gates them:

* a node is connected only after its reconnect backoff has passed (KIP-580, spec §7.3);
* a new connection negotiates API versions before anything else is sent on it;
* a node is *ready* only when connected and not throttled (KIP-219, spec §6.4), so nothing
  is sent to a throttled node until its throttle has passed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from quotagate import __version__
from quotagate.client.backoff_policy import (
    ReconnectState,
    SetupTimeoutState,
    connection_setup_timeout,
    reconnect_backoff,
)
from quotagate.client.clock import Clock
from quotagate.client.config import AdminConfig
from quotagate.client.connection import BrokerConnection
from quotagate.client.errors import (
    AuthenticationError,
    ConnectError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    UnsupportedVersionError,
)
from quotagate.client.events import ClientEvents
from quotagate.client.node import Node, NodeState
from quotagate.client.requests import api_versions_request, error_code
from quotagate.client.versions import choose_version, max_api_versions_version
from quotagate.protocol import api_keys
from quotagate.protocol.api_support import VersionRange, advertised_ranges
from quotagate.protocol.errors import ErrorCode
from quotagate.quota.backoff import RandomSource

log = logging.getLogger(__name__)


class NetworkClient:
    def __init__(
        self,
        config: AdminConfig,
        clock: Clock,
        rng: RandomSource | None = None,
        events: ClientEvents | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self._events = events if events is not None else ClientEvents()
        self._reconnect_backoff = reconnect_backoff(config, rng)
        self._setup_timeout = connection_setup_timeout(config, rng)
        self._nodes: dict[int, NodeState] = {}

    def state(self, node: Node) -> NodeState:
        state = self._nodes.get(node.node_id)
        if state is not None and state.node.address != node.address:
            if state.connection is not None:
                state.connection.close()
            state = None
        if state is None:
            state = NodeState(
                node,
                ReconnectState(self._reconnect_backoff),
                SetupTimeoutState(self._setup_timeout),
            )
            self._nodes[node.node_id] = state
        return state

    def least_loaded(self, nodes: Iterable[Node]) -> Node:
        """A connected node with the fewest requests in flight, else the one that may be
        connected to soonest (``NetworkClient.leastLoadedNode``)."""
        now = self._clock()
        states = [self.state(node) for node in nodes]
        if not states:
            raise NetworkError("no broker nodes known")
        connected = [s for s in states if s.connected and s.throttle.remaining_ms(now) == 0]
        if connected:
            return min(connected, key=lambda s: s.in_flight).node
        return min(states, key=lambda s: s.reconnect.delay_ms(now)).node

    async def send(
        self, node: Node, api_key: int, build: Callable[[int], Any], deadline_ms: float
    ) -> tuple[Any, int]:
        """Send the request ``build(version)`` to ``node`` once it is ready; returns the
        response and the version used."""
        state = await self.ready(node, deadline_ms)
        connection = state.connection
        assert connection is not None
        # No await between the readiness check and the write: see BrokerConnection.send.
        version = choose_version(api_key, state.api_versions)
        request = build(version)
        self._events.request_sent(node.node_id, api_key, version, self._clock())
        response = await connection.send(request, self._config.request_timeout_ms, deadline_ms)
        return response, version

    async def ready(self, node: Node, deadline_ms: float) -> NodeState:
        state = self.state(node)
        async with state.lock:
            self._note_disconnect(state)
            if not state.connected:
                await self._sleep_until(
                    self._clock() + state.reconnect.delay_ms(self._clock()),
                    deadline_ms,
                    f"waiting to reconnect to node {node.node_id} ({node.address}); "
                    f"last attempt: {state.last_error}",
                )
                await self._connect(state, deadline_ms)
        await self._wait_throttle(state, deadline_ms)
        if not state.connected:
            raise NetworkError(f"connection to node {node.node_id} lost while throttled")
        return state

    async def close(self) -> None:
        connections = [s.connection for s in self._nodes.values() if s.connection is not None]
        for connection in connections:
            connection.close()
        await asyncio.gather(*(c.wait_closed() for c in connections))

    def _note_disconnect(self, state: NodeState) -> None:
        """A connection that died since last use counts as a disconnect for reconnect backoff."""
        connection = state.connection
        if connection is not None and connection.closed:
            state.connection = None
            closed_at = connection.closed_at_ms
            state.reconnect.failed(closed_at if closed_at is not None else self._clock())

    async def _connect(self, state: NodeState, deadline_ms: float) -> None:
        node = state.node
        now = self._clock()
        state.reconnect.connecting(now)
        self._events.connect_attempt(node.node_id, now)
        setup_ms = float(state.setup.timeout_ms)
        timeout_ms = min(setup_ms, max(deadline_ms - now, 0.0))
        connection: BrokerConnection | None = None
        try:
            connection = await BrokerConnection.open(
                node.node_id,
                node.address,
                timeout_ms,
                self._config.client_id,
                self._clock,
                lambda at, throttle_ms: self._throttled(state, at, throttle_ms),
                self._config.connector,
            )
            state.api_versions = await self._negotiate(connection, deadline_ms)
        except KafkaError as exc:
            if connection is not None:
                connection.close()
            elif isinstance(exc.__cause__, TimeoutError) and timeout_ms == setup_ms:
                state.setup.timed_out()  # only a setup timeout, not the call's deadline
            state.reconnect.failed(self._clock())
            state.last_error = exc.message
            self._events.connect_failed(node.node_id, self._clock(), state.reconnect.backoff_ms)
            log.debug("connect to node %d failed: %s", node.node_id, exc)
            if isinstance(exc, ConnectError | AuthenticationError):
                raise  # a refused login fails the call: it is not retried
            raise ConnectError(f"setting up node {node.node_id} failed: {exc}") from exc
        except BaseException:
            # Cancelled mid-negotiation: the connection is nobody's yet, so close it here.
            if connection is not None:
                connection.close()
            raise
        state.connection = connection
        state.reconnect.ready()
        state.setup.ready()
        self._events.connected(node.node_id, self._clock())

    async def _negotiate(
        self, connection: BrokerConnection, deadline_ms: float
    ) -> dict[int, VersionRange]:
        """ApiVersions at our highest version; a broker that does not know it answers
        UNSUPPORTED_VERSION with its own range, and we ask again with that."""
        version = max_api_versions_version()
        for _ in range(2):
            response = await connection.send(
                api_versions_request(version, __version__),
                self._config.request_timeout_ms,
                deadline_ms,
            )
            ranges = {r.api_key: r for r in advertised_ranges(response)}
            code = error_code(response.error_code)
            if code == ErrorCode.UNSUPPORTED_VERSION and api_keys.API_VERSIONS in ranges:
                version = min(version, ranges[api_keys.API_VERSIONS].max_version)
                continue
            if code != ErrorCode.NONE:
                raise KafkaError(code, "ApiVersions failed")
            return ranges
        raise UnsupportedVersionError("the broker accepts no ApiVersions version we speak")

    def _throttled(self, state: NodeState, now_ms: float, throttle_ms: int) -> None:
        state.throttle.throttle(now_ms, throttle_ms)
        self._events.throttled(state.node.node_id, now_ms, throttle_ms)

    async def _wait_throttle(self, state: NodeState, deadline_ms: float) -> None:
        # Loop: another response may push throttleUntil further while we sleep.
        while (remaining := state.throttle.remaining_ms(self._clock())) > 0:
            await self._sleep_until(
                self._clock() + remaining,
                deadline_ms,
                f"node {state.node.node_id} is throttled (KIP-219)",
            )

    async def _sleep_until(self, until_ms: float, deadline_ms: float, what: str) -> None:
        """Sleep until ``until_ms``; if the deadline comes first, sleep to it and time out."""
        now = self._clock()
        if until_ms <= now:
            return
        if until_ms > deadline_ms:
            await asyncio.sleep(max(deadline_ms - now, 0.0) / 1000)
            raise KafkaTimeoutError(f"timed out {what}")
        await asyncio.sleep((until_ms - now) / 1000)
