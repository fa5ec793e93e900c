"""max.connections, connections.max.idle.ms, /metrics and graceful shutdown."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol import codec
from quotagate.protocol.host_port import HostPort
from support.exchanges import long_poll_fetch
from support.raw_socket import connect, read_frame

pytestmark = pytest.mark.integration


def _round_trip(sock: socket.socket, request: Any, correlation_id: int) -> bytes:
    sock.sendall(codec.encode_request_frame(request, correlation_id, "hygiene"))
    return read_frame(sock)


def _is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_max_connections_makes_the_acceptor_wait(
    tansu: TansuBroker,
    start_gateway: Callable[..., BackgroundGateway],
    wait_for: Any,
) -> None:
    """Kafka's max.connections: at the limit the acceptor stops taking connections (they wait
    in the backlog) until one closes; nothing is refused."""
    gateway = start_gateway(tansu.bootstrap, max_connections=2)
    first, second = connect(gateway), connect(gateway)
    for sock, cid in ((first, 1), (second, 2)):
        assert codec.decode_response(_round_trip(sock, ApiVersionsRequest(), cid), 18, 0)
    third = connect(gateway)
    third.sendall(codec.encode_request_frame(ApiVersionsRequest(), 3, "hygiene"))
    third.settimeout(1.0)
    with pytest.raises(TimeoutError):
        third.recv(1)
    registry = gateway.gateway.metrics.registry
    waits = {"listener": "PLAINTEXT", "reason": "max.connections"}
    assert registry.get_sample_value("quotagate_connection_acceptor_waits_total", waits) == 1
    first.close()
    third.settimeout(30)
    assert codec.decode_response(read_frame(third), 18, 0)
    wait_for(
        lambda: registry.get_sample_value(
            "quotagate_connection_acceptor_blocked_seconds_total", {"listener": "PLAINTEXT"}
        ),
        10,
        "the blocked time",
    )
    for sock in (second, third):
        sock.close()
    gateway.stop()


def test_idle_connections_are_closed(
    tansu: TansuBroker,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = start_gateway(tansu.bootstrap, connections_max_idle_ms=300)
    with connect(gateway) as sock:
        assert _round_trip(sock, ApiVersionsRequest(), 1)
        assert _is_closed(sock)
    wait_for(lambda: "connections.max.idle.ms exceeded" in caplog.text, 10, "the log line")
    gateway.stop()


def test_metrics_endpoint(
    tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway]
) -> None:
    gateway = start_gateway(tansu.bootstrap, metrics_listen=HostPort("127.0.0.1", 0))
    admin = AdminClient({"bootstrap.servers": str(gateway.bootstrap)})
    assert admin.list_topics(timeout=30).brokers
    address = gateway.gateway.metrics_address
    assert address is not None
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert 'quotagate_requests_total{api="metadata"}' in text
    assert 'quotagate_request_bytes_total{api="api_versions"}' in text
    assert 'quotagate_response_bytes_total{api="metadata"}' in text
    assert 'quotagate_upstream_latency_seconds_bucket{api="metadata",le="0.005"}' in text
    assert 'quotagate_connections{listener="PLAINTEXT"}' in text
    gateway.stop()


def test_shutdown_drains_in_flight_requests(
    tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway]
) -> None:
    gateway = start_gateway(tansu.bootstrap)
    topic = f"drain-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": str(gateway.bootstrap)})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    # A fetch on an empty partition waits upstream for max_wait: it is in flight while the
    # gateway shuts down, and must still be answered before the connection closes.
    fetch = long_poll_fetch(topic, 1500)
    with connect(gateway) as sock:
        sent = time.monotonic()
        sock.sendall(codec.encode_request_frame(fetch, 99, "drain"))
        wait_for_inflight = time.monotonic() + 10
        while not any(c.inflight for c in gateway.gateway.services.connections):
            assert time.monotonic() < wait_for_inflight, "fetch never reached the gateway"
            time.sleep(0.01)
        stopper = threading.Thread(target=gateway.stop)
        stopper.start()
        response = read_frame(sock)
        assert time.monotonic() - sent >= 1.0, "the fetch was not held upstream: nothing drained"
        assert struct.unpack_from(">i", response, 4)[0] == 99
        assert codec.decode_response(response, 1, 4).responses[0].topic == topic
        assert _is_closed(sock)
        stopper.join(30)
        assert not stopper.is_alive()
