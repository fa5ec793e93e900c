"""A small request/response channel to an upstream broker for the gateway's own requests
(start-up discovery of brokers and API versions), built on the same framing as the data path.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

from quotagate.protocol import api_table, codec
from quotagate.protocol.framing import FrameReader
from quotagate.protocol.headers import response_correlation_id
from quotagate.protocol.host_port import HostPort


class ControlChannel(asyncio.Protocol):
    def __init__(self) -> None:
        self._reader = FrameReader(2_147_483_647)
        self._pending: dict[int, tuple[asyncio.Future[bytes], int, int]] = {}
        self._next_id = 1
        self._transport: asyncio.Transport | None = None
        self._lost = asyncio.get_running_loop().create_future()

    @classmethod
    async def open(cls, address: HostPort, timeout_s: float) -> ControlChannel:
        loop = asyncio.get_running_loop()
        _, channel = await asyncio.wait_for(
            loop.create_connection(cls, address.host, address.port), timeout_s
        )
        return channel

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (frame := self._reader.next_frame()) is not None:
            entry = self._pending.pop(response_correlation_id(frame), None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        error = ConnectionError(f"upstream closed the control connection: {exc}")
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def request(self, body: Any, timeout_s: float) -> Any:
        """Send a kio request entity, wait for and decode its response."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("control connection is closed")
        correlation_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        api_key, version = int(body.__api_key__), int(body.__version__)
        self._pending[correlation_id] = (future, api_key, version)
        self._transport.write(codec.encode_request_frame(body, correlation_id, "quotagate"))
        frame = await asyncio.wait_for(future, timeout_s)
        return codec.decode_response(frame, api_key, version)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def build_request(api_key: int, api_version: int, **fields: Any) -> Any:
    """A kio request of any version from the fields that version has (others are dropped)."""
    schema: Any = api_table.request_schema(api_key, api_version)
    names = {f.name for f in dataclasses.fields(schema)}
    return schema(**{k: v for k, v in fields.items() if k in names})
