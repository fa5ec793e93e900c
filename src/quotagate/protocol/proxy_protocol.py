"""The PROXY protocol (HAProxy's, versions 1 and 2), parsed sans-I/O.

A load balancer in front of the gateway writes one header before the client's own bytes,
naming the client's address. :func:`parse` is given the bytes read so far and answers either
the header or how many more bytes at least are needed, never more than the header still
has, so that the shell can read exactly the header and leave the client's first Kafka (or
TLS) byte in the socket. Every length is checked against what was received before it is
used; nothing is allocated from a length the peer declared.

Only what a TCP gateway can use is accepted: v1 ``TCP4``/``TCP6``/``UNKNOWN`` and v2
``PROXY`` over TCP/IPv4 or TCP/IPv6, or ``LOCAL`` (the balancer's own health check) and
address families the gateway cannot key quotas on (``UNSPEC``, ``UNIX``), for which the
connection's own peer address stands. TLVs are skipped (bounded by the header length).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Final

V1_PREFIX: Final = b"PROXY "
V1_MAX: Final = 107
"""The spec's longest v1 line, CRLF included."""
V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
V2_FIXED: Final = 16
V2_MAX_PAYLOAD: Final = 2048
"""Longest v2 address block plus TLVs accepted. The format allows 65535; balancers send
far less (addresses plus a few TLVs), and the gateway does not hold 64 KiB per handshake."""

_TCP4: Final = 0x11
_TCP6: Final = 0x21
_UNSPEC: Final = 0x00
_UNIX: Final = 0x31
_V2_LENGTHS: Final = {_TCP4: 12, _TCP6: 36, _UNIX: 216, _UNSPEC: 0}
_DIGITS: Final = frozenset(b"0123456789")


class ProxyHeaderError(ValueError):
    """Not a valid PROXY protocol header; the message says what is wrong (never the bytes)."""


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    version: int
    length: int
    """Bytes the header took: the client's own stream starts after them."""
    source: tuple[str, int] | None
    """The client's address and port, or None (``LOCAL``, ``UNKNOWN``, a family without
    an IP): the connection's own peer address stands."""
    destination: tuple[str, int] | None


def parse(data: bytes) -> ProxyHeader | int:
    """The header at the start of ``data``, or how many more bytes it needs at least."""
    if not data:
        return 1
    if data[0] == V1_PREFIX[0]:
        return _parse_v1(data)
    if data[0] == V2_SIGNATURE[0]:
        return _parse_v2(data)
    raise ProxyHeaderError("no PROXY protocol header: the connection starts with other bytes")


def _parse_v1(data: bytes) -> ProxyHeader | int:
    seen = min(len(data), len(V1_PREFIX))
    if data[:seen] != V1_PREFIX[:seen]:
        raise ProxyHeaderError("not a PROXY protocol v1 header")
    end = data.find(b"\r\n", 0, V1_MAX)
    if end < 0:
        if len(data) >= V1_MAX:
            raise ProxyHeaderError(f"PROXY protocol v1 line longer than {V1_MAX} bytes")
        # A CR last may be followed by its LF: one byte; else CRLF is two bytes away at least.
        return 1 if data[-1:] == b"\r" else 2
    line = data[len(V1_PREFIX) : end]
    if not line.isascii():
        raise ProxyHeaderError("PROXY protocol v1 line is not ASCII")
    fields = line.decode("ascii").split(" ")
    length = end + 2
    if fields[0] == "UNKNOWN":
        # The spec lets the sender add anything after UNKNOWN; the receiver ignores it.
        return ProxyHeader(1, length, None, None)
    if len(fields) != 5 or fields[0] not in ("TCP4", "TCP6"):
        raise ProxyHeaderError(
            "PROXY protocol v1 line is not 'PROXY TCP4|TCP6 <src> <dst> <sport> <dport>'"
        )
    version = 4 if fields[0] == "TCP4" else 6
    source = (_v1_address(fields[1], version), _v1_port(fields[3]))
    destination = (_v1_address(fields[2], version), _v1_port(fields[4]))
    return ProxyHeader(1, length, source, destination)


def _v1_address(text: str, version: int) -> str:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ProxyHeaderError("PROXY protocol v1 address is not an IP address") from None
    if address.version != version:
        raise ProxyHeaderError(f"PROXY protocol v1 address is not an IPv{version} address")
    return str(address)


def _v1_port(text: str) -> int:
    raw = text.encode("ascii")
    if not raw or len(raw) > 5 or not set(raw) <= _DIGITS or (len(raw) > 1 and raw[0] == 0x30):
        raise ProxyHeaderError("PROXY protocol v1 port is not a decimal number 0-65535")
    port = int(raw)
    if port > 65535:
        raise ProxyHeaderError("PROXY protocol v1 port is not a decimal number 0-65535")
    return port


def _parse_v2(data: bytes) -> ProxyHeader | int:
    seen = min(len(data), len(V2_SIGNATURE))
    if data[:seen] != V2_SIGNATURE[:seen]:
        raise ProxyHeaderError("not a PROXY protocol v2 signature")
    if len(data) < V2_FIXED:
        return V2_FIXED - len(data)
    version_command, family = data[12], data[13]
    payload = int.from_bytes(data[14:16], "big")
    if version_command >> 4 != 2:
        raise ProxyHeaderError(f"PROXY protocol version {version_command >> 4} is not 2")
    command = version_command & 0x0F
    if command > 1:
        raise ProxyHeaderError(f"PROXY protocol v2 command {command} is neither LOCAL nor PROXY")
    if payload > V2_MAX_PAYLOAD:
        raise ProxyHeaderError(
            f"PROXY protocol v2 header declares {payload} bytes, more than {V2_MAX_PAYLOAD}"
        )
    length = V2_FIXED + payload
    if len(data) < length:
        return length - len(data)
    if command == 0:  # LOCAL: the balancer's own connection (a health check)
        return ProxyHeader(2, length, None, None)
    needed = _V2_LENGTHS.get(family)
    if needed is None:
        raise ProxyHeaderError(
            f"PROXY protocol v2 family/transport 0x{family:02x} is not TCP over IPv4 or IPv6"
        )
    if payload < needed:
        raise ProxyHeaderError(
            f"PROXY protocol v2 address block of {payload} bytes, {needed} needed"
        )
    if family == _TCP4:
        source = str(ipaddress.IPv4Address(data[16:20]))
        destination = str(ipaddress.IPv4Address(data[20:24]))
        ports = _ports(data, 24)
    elif family == _TCP6:
        source = str(ipaddress.IPv6Address(data[16:32]))
        destination = str(ipaddress.IPv6Address(data[32:48]))
        ports = _ports(data, 48)
    else:
        return ProxyHeader(2, length, None, None)
    return ProxyHeader(2, length, (source, ports[0]), (destination, ports[1]))


def _ports(data: bytes, at: int) -> tuple[int, int]:
    return int.from_bytes(data[at : at + 2], "big"), int.from_bytes(data[at + 2 : at + 4], "big")


def v1_header(source: tuple[str, int], destination: tuple[str, int]) -> bytes:
    """A v1 line, as a load balancer writes it (for tests and tools)."""
    family = "TCP6" if ":" in source[0] else "TCP4"
    return f"PROXY {family} {source[0]} {destination[0]} {source[1]} {destination[1]}\r\n".encode()


def v2_header(source: tuple[str, int], destination: tuple[str, int], tlvs: bytes = b"") -> bytes:
    """A v2 ``PROXY`` header over TCP, as a load balancer writes it (for tests and tools)."""
    src, dst = ipaddress.ip_address(source[0]), ipaddress.ip_address(destination[0])
    family = _TCP6 if src.version == 6 else _TCP4
    block = src.packed + dst.packed + struct.pack(">HH", source[1], destination[1]) + tlvs
    return V2_SIGNATURE + struct.pack(">BBH", 0x21, family, len(block)) + block
