"""A plain socket to a gateway, for the tests that speak the Kafka protocol byte by byte:
connect, read exactly so many bytes, read one size-prefixed frame."""

from __future__ import annotations

import socket
import struct

from quotagate.gateway.embedded.background import BackgroundGateway


def connect(gateway: BackgroundGateway, timeout_s: float = 30) -> socket.socket:
    address = gateway.bootstrap
    return socket.create_connection((address.host, address.port), timeout=timeout_s)


def read_exactly(sock: socket.socket, count: int) -> bytes:
    """``count`` bytes; ``ConnectionError`` when the peer closes first."""
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes:
    """One frame, its 4-byte size prefix included."""
    header = read_exactly(sock, 4)
    return header + read_exactly(sock, struct.unpack(">i", header)[0])
