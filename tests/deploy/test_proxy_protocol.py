"""The PROXY protocol (issue 35): the parser's vectors, and a listener that expects the header
keying max.connections.per.ip, and what a connection records, on the address it names."""

from __future__ import annotations

import logging
import re
import socket
import struct
from collections.abc import Callable
from typing import Any

import pytest

from quotagate.gateway.config import ConfigError, parse_config
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol.proxy_protocol import (
    V1_MAX,
    V2_MAX_PAYLOAD,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    parse,
    v1_header,
    v2_header,
)
from support.loopback import api_versions, connect_from

LB = ("192.0.2.10", 443)


def _read_exactly(stream: bytes) -> ProxyHeader:
    """Feed the parser as the gateway reads a socket: only as many bytes as it asks for."""
    data = b""
    while True:
        result = parse(data)
        if isinstance(result, ProxyHeader):
            return result
        assert result >= 1
        assert len(data) + result <= len(stream), "asked for more than the stream has"
        data += stream[len(data) : len(data) + result]


@pytest.mark.parametrize(
    ("header", "source"),
    [
        (b"PROXY TCP4 198.51.100.7 192.0.2.10 40001 9092\r\n", ("198.51.100.7", 40001)),
        (b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 9092\r\n", ("2001:db8::7", 65535)),
        (b"PROXY UNKNOWN\r\n", None),
        (b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", None),
        (v2_header(("198.51.100.7", 40001), LB), ("198.51.100.7", 40001)),
        (v2_header(("2001:db8::7", 1), ("2001:db8::1", 2)), ("2001:db8::7", 1)),
        (v2_header(("198.51.100.7", 5), LB, tlvs=b"\x04\x00\x03abc"), ("198.51.100.7", 5)),
        (V2_SIGNATURE + b"\x20\x00\x00\x00", None),  # LOCAL: the balancer's health check
        (V2_SIGNATURE + b"\x21\x00\x00\x00", None),  # UNSPEC
    ],
)
def test_headers_are_read_exactly_and_name_the_client(
    header: bytes, source: tuple[str, int] | None
) -> None:
    kafka_bytes = b"\x00\x00\x00\x0a" + bytes(10)
    parsed = _read_exactly(header + kafka_bytes)
    assert parsed.length == len(header)
    assert parsed.source == source


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00\x00\x00\x0aKafka", "no PROXY protocol header"),
        (b"PROXZ", "not a PROXY protocol v1 header"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "is not 'PROXY TCP4|TCP6"),
        (b"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n", "not an IP address"),
        (b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", "not an IPv4 address"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", "port is not a decimal"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", "port is not a decimal"),
        (b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "port is not a decimal"),
        (b"PROXY " + b"x" * V1_MAX, "longer than 107 bytes"),
        (V2_SIGNATURE + b"\x11\x11\x00\x0c" + bytes(12), "version 1 is not 2"),
        (V2_SIGNATURE + b"\x22\x11\x00\x0c" + bytes(12), "command 2"),
        (V2_SIGNATURE + b"\x21\x12\x00\x0c" + bytes(12), "0x12 is not TCP"),  # UDP
        (V2_SIGNATURE + b"\x21\x11\x00\x08" + bytes(8), "8 bytes, 12 needed"),
        (V2_SIGNATURE + b"\x21\x11" + struct.pack(">H", V2_MAX_PAYLOAD + 1), "more than"),
        (b"\r\n\r\nX", "not a PROXY protocol v2 signature"),
    ],
)
def test_bad_headers_say_what_is_wrong(data: bytes, reason: str) -> None:
    with pytest.raises(ProxyHeaderError, match=re.escape(reason)):
        parse(data)


def test_a_declared_length_is_waited_for_not_allocated() -> None:
    declared = V2_SIGNATURE + b"\x21\x11" + struct.pack(">H", V2_MAX_PAYLOAD)
    assert parse(declared) == V2_MAX_PAYLOAD


def test_the_listener_keys_are_checked() -> None:
    listener = {"name": "lb", "listen": "127.0.0.1:9092", "proxy.protocol": "required"}
    config = parse_config({"listeners": [listener], "upstream": {"bootstrap.servers": "x:1"}})
    assert config.listeners[0].proxy_protocol == "required"
    with pytest.raises(ConfigError, match=re.escape("proxy.protocol")):
        parse_config(
            {
                "listeners": [{**listener, "proxy.protocol": "v3"}],
                "upstream": {"bootstrap.servers": "x:1"},
            }
        )


@pytest.mark.integration
def test_per_ip_limits_key_on_the_proxy_address(
    tansu: TansuBroker,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    """Every connection comes from the balancer (127.0.0.5); the limit of one connection per
    IP holds for each client address its headers name, not for the balancer."""
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = start_gateway(
        tansu.bootstrap,
        listener={"proxy_protocol": "required", "proxy_protocol_timeout_ms": 2000},
        max_connections_per_ip=1,
    )
    host, port = gateway.bootstrap.host, gateway.bootstrap.port
    gateway_address = (host, port)

    def through_balancer(client: str, version: int) -> socket.socket:
        sock = connect_from("127.0.0.5", host, port)
        make = v1_header if version == 1 else v2_header
        sock.sendall(make((client, 40000), gateway_address))
        return sock

    first = through_balancer("198.51.100.1", 2)
    second = through_balancer("198.51.100.2", 1)
    assert api_versions(first) and api_versions(second)
    # The same client again, through the same balancer: over its limit of one.
    again = through_balancer("198.51.100.1", 1)
    assert not api_versions(again)
    wait_for(lambda: "max.connections.per.ip" in caplog.text, 10, "the refusal line")
    assert "client=198.51.100.1" in caplog.text
    # What the connection records (and its usage events carry) is the client's address.
    hosts = {c.info.client_host for c in list(gateway.gateway.services.connections)}
    assert hosts == {"198.51.100.1", "198.51.100.2"}

    # No header: refused, with a structured line naming the peer and the reason.
    with connect_from("127.0.0.6", host, port) as bare:
        assert not api_versions(bare)
    wait_for(lambda: "proxy_header_refused" in caplog.text, 10, "the header refusal line")
    line = next(r.getMessage() for r in caplog.records if "proxy_header_refused" in r.getMessage())
    assert "peer=127.0.0.6" in line and "no PROXY protocol header" in line
    # A header that never completes is refused at the timeout, the listener serving meanwhile.
    with connect_from("127.0.0.7", host, port) as slow:
        slow.sendall(b"PROXY TCP4 ")
        third = through_balancer("198.51.100.3", 2)
        assert api_versions(third)
        slow.settimeout(10)
        assert slow.recv(1) == b""
    assert "no whole PROXY header within 2 s" in caplog.text
    for sock in (first, second, third):
        sock.close()
