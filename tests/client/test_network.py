"""NetworkClient connection setup against a plain TCP server (no broker needed)."""

from __future__ import annotations

import asyncio
import math

from quotagate.client.clock import monotonic_ms
from quotagate.client.config import AdminConfig
from quotagate.client.network import NetworkClient
from quotagate.client.node import Node
from quotagate.protocol.host_port import HostPort


async def test_a_setup_cancelled_during_api_versions_closes_its_connection() -> None:
    accepted = asyncio.Event()
    peer_closed = asyncio.Event()

    async def silent_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        while await reader.read(65_536):  # never answers ApiVersions
            pass
        peer_closed.set()
        writer.close()

    server = await asyncio.start_server(silent_broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    address = HostPort("127.0.0.1", port)
    network = NetworkClient(AdminConfig((address,)), monotonic_ms)
    try:
        setup = asyncio.create_task(network.ready(Node(-1, address), math.inf))
        await asyncio.wait_for(accepted.wait(), 10)
        setup.cancel()
        await asyncio.gather(setup, return_exceptions=True)
        await asyncio.wait_for(peer_closed.wait(), 10)
    finally:
        await network.close()
        server.close()
        await server.wait_closed()
