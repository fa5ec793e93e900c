"""One TCP connection to a broker: pipelined requests matched by correlation id, responses
decoded with kio, and the KIP-219 bookkeeping of spec §6.4 (node throttle on responses that
self-throttle, throttled time added to the other in-flight requests, request timeout that
does not count throttled time).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from quotagate.client.clock import Clock
from quotagate.client.config import Connector
from quotagate.client.errors import (
    ConnectError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    RequestTimeoutError,
)
from quotagate.client.requests import throttle_time_ms
from quotagate.client.throttle import InFlight, must_self_throttle
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.codec import CodecError
from quotagate.protocol.framing import FrameError, FrameReader
from quotagate.protocol.headers import (
    RESPONSE_CORRELATION_END,
    HeaderError,
    response_correlation_id,
)
from quotagate.protocol.host_port import HostPort

log = logging.getLogger(__name__)

_READ_CHUNK = 65_536

ThrottleListener = Callable[[float, int], None]
"""Called with (now_ms, throttle_ms) when a response obliges the client to pause the node."""


class BrokerConnection:
    def __init__(
        self,
        node_id: int,
        address: HostPort,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        clock: Clock,
        on_throttle: ThrottleListener,
    ) -> None:
        self.node_id = node_id
        self.address = address
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._clock = clock
        self._on_throttle = on_throttle
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[InFlight, asyncio.Future[Any]]] = {}
        self._frames = FrameReader()
        self._closed: KafkaError | None = None
        self.closed_at_ms: float | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls,
        node_id: int,
        address: HostPort,
        timeout_ms: float,
        client_id: str,
        clock: Clock,
        on_throttle: ThrottleListener,
        connector: Connector | None = None,
    ) -> BrokerConnection:
        """Connect, or raise ConnectError (refused, unreachable, setup timeout, and a TLS or
        SASL refusal when ``connector`` secures the connection)."""
        try:
            opening: Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
            if connector is None:
                opening = asyncio.open_connection(address.host, address.port)
            else:
                opening = connector(address, timeout_ms / 1000)
            reader, writer = await asyncio.wait_for(opening, timeout_ms / 1000)
        except TimeoutError as exc:
            raise ConnectError(
                f"connection to node {node_id} ({address}) not set up within {timeout_ms:.0f} ms"
            ) from exc
        except OSError as exc:
            raise ConnectError(
                f"cannot connect to node {node_id} ({address}): {exc.strerror or exc}"
            ) from exc
        return cls(node_id, address, reader, writer, client_id, clock, on_throttle)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def send(
        self, request: Any, request_timeout_ms: int, deadline_ms: float = math.inf
    ) -> Any:
        """Send ``request`` and return the decoded response.

        Gives up at ``request.timeout.ms`` (throttled time excluded; retriable) or at the
        call's deadline, whichever comes first; either way the connection is closed, as the
        Java client disconnects a node whose request it abandons.

        The frame is written before the first await, so a caller that checked the node's
        throttle just before cannot be overtaken by a throttled response.
        """
        if self._closed is not None:
            raise self._closed
        api_key, api_version = int(request.__api_key__), int(request.__version__)
        correlation_id = next(self._correlation)
        frame = codec.encode_request_frame(request, correlation_id, self._client_id)
        in_flight = InFlight(api_key, api_version, self._clock())
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (in_flight, future)
        self._writer.write(frame)
        what = f"{api_table.api_name(api_key)} v{api_version} to node {self.node_id}"
        try:
            return await self._await_response(
                future, in_flight, request_timeout_ms, deadline_ms, what
            )
        finally:
            # Abandoned (timed out, or the caller was cancelled): nobody reads it any more.
            self._pending.pop(correlation_id, None)
            if not future.done():
                future.cancel()

    async def _await_response(
        self,
        future: asyncio.Future[Any],
        in_flight: InFlight,
        request_timeout_ms: int,
        deadline_ms: float,
        what: str,
    ) -> Any:
        while True:
            # Wake at the current expiry; throttled time may move it while we wait.
            wake_ms = min(in_flight.expires_at_ms(request_timeout_ms), deadline_ms)
            remaining_ms = wake_ms - self._clock()
            if remaining_ms > 0:
                await asyncio.wait({future}, timeout=remaining_ms / 1000)
            if future.done():
                return future.result()
            now = self._clock()
            error: KafkaError | None = None
            if now >= deadline_ms:
                error = KafkaTimeoutError(f"timed out waiting for the response to {what}")
            elif in_flight.expired(now, request_timeout_ms):
                error = RequestTimeoutError(
                    f"no response to {what} within request.timeout.ms={request_timeout_ms} "
                    "(throttled time excluded)"
                )
            if error is not None:
                future.cancel()
                self.close(error)
                raise error

    def close(self, reason: KafkaError | None = None) -> None:
        if self._closed is not None:
            return
        self._closed = reason or NetworkError(f"connection to node {self.node_id} closed")
        self.closed_at_ms = self._clock()
        self._writer.close()
        self._read_task.cancel()
        for _in_flight, future in self._pending.values():
            if not future.done():
                future.set_exception(self._closed)
        self._pending.clear()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await self._read_task
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_READ_CHUNK)
                if not data:
                    self.close(NetworkError(f"node {self.node_id} closed the connection"))
                    return
                self._frames.feed(data)
                while (frame := self._frames.next_frame()) is not None:
                    self._complete(frame)
        except (OSError, FrameError, HeaderError) as exc:
            self.close(NetworkError(f"connection to node {self.node_id} failed: {exc}"))

    def _complete(self, frame: bytes) -> None:
        correlation_id = response_correlation_id(frame)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            raise HeaderError(f"response with unknown correlation id {correlation_id}")
        in_flight, future = entry
        try:
            response = _decode(frame, in_flight.api_key, in_flight.api_version)
        except CodecError as exc:
            future.set_exception(NetworkError(f"undecodable response: {exc}"))
            return
        throttle_ms = throttle_time_ms(response)
        if must_self_throttle(in_flight.api_key, in_flight.api_version, throttle_ms):
            now = self._clock()
            self._on_throttle(now, throttle_ms)
            for other, _future in self._pending.values():
                other.add_throttle(throttle_ms)
            log.debug(
                "node %d throttled for %d ms by %s v%d",
                self.node_id,
                throttle_ms,
                api_table.api_name(in_flight.api_key),
                in_flight.api_version,
            )
        if not future.done():
            future.set_result(response)


def _decode(frame: bytes, api_key: int, api_version: int) -> Any:
    try:
        return codec.decode_response(frame, api_key, api_version)
    except CodecError:
        if api_key != api_keys.API_VERSIONS:
            raise
        # A broker that does not know our ApiVersions version answers with a v0 body.
        schema = api_table.response_schema(api_keys.API_VERSIONS, 0)
        return codec.decode_body(schema, frame, RESPONSE_CORRELATION_END)
