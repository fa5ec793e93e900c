"""Clients from other addresses, on loopback only.

On Linux every 127.x.y.z is this machine, so a client socket bound to 127.0.0.2 before it
connects is, to the gateway, another host. The client speaks the Kafka protocol: it sends
ApiVersions (what every Kafka client sends first) and waits for the answer.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from kio.schema.api_versions.v0.request import ApiVersionsRequest

from quotagate.protocol import codec
from support.raw_socket import read_frame

API_VERSIONS_FRAME = codec.encode_request_frame(ApiVersionsRequest(), 1, "loopback")


def connect_from(source: str, host: str, port: int, timeout_s: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    sock.bind((source, 0))
    sock.connect((host, port))
    return sock


def api_versions(sock: socket.socket) -> bool:
    """Send ApiVersions; True when it is answered, False when the gateway closes instead.
    A timeout (no answer, not closed) raises ``TimeoutError``."""
    try:
        sock.sendall(API_VERSIONS_FRAME)
        read_frame(sock)
    except ConnectionError:
        return False
    return True


def answered(source: str, host: str, port: int, timeout_s: float = 10.0) -> bool:
    """A fresh connection from ``source`` and its first request answered."""
    try:
        sock = connect_from(source, host, port, timeout_s)
    except ConnectionError:
        return False
    with sock:
        return api_versions(sock)


async def answered_async(source: str, host: str, port: int, timeout_s: float) -> bool:
    """:func:`answered` for many at once: False when closed, refused or not answered in time."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0))
            writer.write(API_VERSIONS_FRAME)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
        return True
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, OSError):
        return False
    finally:
        if writer is not None:
            writer.close()
