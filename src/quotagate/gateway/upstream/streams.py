"""asyncio streams over a connection opened as an :class:`UpstreamSecurity` says (TLS, then
SASL): for clients written on streams, such as the admin client behind the CLI."""

from __future__ import annotations

import asyncio

from quotagate.gateway.upstream.channel import open_secured
from quotagate.gateway.upstream.security import UpstreamSecurity
from quotagate.protocol.host_port import HostPort


async def open_streams(
    security: UpstreamSecurity, address: HostPort, timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    channel = await open_secured(address, security, timeout_s)
    reader = asyncio.StreamReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    transport = channel.hand_over(protocol)
    return reader, asyncio.StreamWriter(transport, protocol, reader, asyncio.get_running_loop())
