"""asyncio streams over a connection opened as an :class:`UpstreamSecurity` says (TLS, then
SASL): for clients written on streams, such as the admin client behind the CLI."""

from __future__ import annotations

import asyncio

from quotagate.gateway.control import ControlChannel
from quotagate.gateway.upstream_security import UpstreamSecurity
from quotagate.protocol.host_port import HostPort


async def open_streams(
    security: UpstreamSecurity, address: HostPort, timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if not (security.uses_tls or security.uses_sasl):
        return await asyncio.open_connection(address.host, address.port)
    channel = await ControlChannel.open(address, timeout_s, security)
    reader = asyncio.StreamReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    transport = channel.hand_over(protocol)
    return reader, asyncio.StreamWriter(transport, protocol, reader, asyncio.get_running_loop())
