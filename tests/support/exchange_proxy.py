"""A TCP proxy in front of the upstream that can stall the fleet's exchange and nothing else.

Every connection's first request names its client (the Kafka request header's client id);
the fleet's librdkafka clients are ``quotagate-fleet-<member>``. While the proxy is paused,
bytes of those connections wait in both directions (the upstream neither hears the reports
nor answers the followers), then flow again in one burst when it resumes: a slow, stalled or
flapping exchange, while clients' requests and the store pass untouched. tansu must advertise
the proxy's port, so that connections made from metadata come through it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading

from quotagate.gateway.embedded import LOOPBACK, free_port

FLEET_CLIENT_PREFIX = b"quotagate-fleet-"


class ExchangeProxy:
    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        self.port = port if port is not None else free_port()
        self._upstream_port = upstream_port
        self._loop = asyncio.new_event_loop()
        self._open = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name="exchange-proxy", daemon=True)
        self._ready = threading.Event()
        self.fleet_connections = 0
        self.other_connections = 0

    def __enter__(self) -> ExchangeProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the exchange proxy did not start")
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def pause(self) -> None:
        self._loop.call_soon_threadsafe(self._open.clear)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(self._open.set)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._open.set()
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, LOOPBACK, self.port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _serve(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        try:
            upstream, to_upstream = await asyncio.open_connection(LOOPBACK, self._upstream_port)
        except OSError:
            to_client.close()
            return
        try:
            first = await _first_request(client)
            fleet = _client_id(first).startswith(FLEET_CLIENT_PREFIX)
            if fleet:
                self.fleet_connections += 1
            else:
                self.other_connections += 1
            await self._gate(fleet)
            to_upstream.write(first)
            await asyncio.gather(
                self._pump(client, to_upstream, fleet), self._pump(upstream, to_client, fleet)
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            to_client.close()
            to_upstream.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fleet: bool
    ) -> None:
        while data := await reader.read(65536):
            await self._gate(fleet)
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _gate(self, fleet: bool) -> None:
        if fleet:
            await self._open.wait()


async def _first_request(reader: asyncio.StreamReader) -> bytes:
    size = await reader.readexactly(4)
    return size + await reader.readexactly(struct.unpack(">i", size)[0])


def _client_id(frame: bytes) -> bytes:
    """The request header's client id (v1 and v2 headers both start with it as a string)."""
    if len(frame) < 14:
        return b""
    (length,) = struct.unpack(">h", frame[12:14])
    return frame[14 : 14 + length] if length > 0 else b""
