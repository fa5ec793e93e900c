"""Connection quotas through a real gateway: max.connections.per.ip (with overrides) refuses
one address's extra connections while others connect, and max.connection.creation.rate makes
a listener's acceptor wait instead of refusing. Other hosts are other loopback addresses."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime, QuotaSettings
from quotagate.gateway.config import ConfigError, load_config, parse_config
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.limits.connections import ConnectionLimits
from quotagate.gateway.metrics import GatewayMetrics
from support.loopback import answered, api_versions, connect_from

pytestmark = pytest.mark.integration


def _counter(gateway: BackgroundGateway, name: str, **labels: str) -> float:
    value = gateway.gateway.metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def test_max_connections_per_ip_refuses_one_address_while_others_connect(
    tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway], wait_for: Any
) -> None:
    gateway = start_gateway(
        tansu.bootstrap,
        max_connections_per_ip=3,
        max_connections_per_ip_overrides=(("127.0.0.1", 100), ("127.0.0.4", 1)),
    )
    host, port = gateway.bootstrap.host, gateway.bootstrap.port
    held = [connect_from("127.0.0.2", host, port) for _ in range(3)]
    assert all(api_versions(sock) for sock in held)
    # The fourth and fifth from that address are closed at once, unanswered.
    started = time.monotonic()
    assert not answered("127.0.0.2", host, port)
    assert not answered("127.0.0.2", host, port)
    assert time.monotonic() - started < 5
    refused = "quotagate_connections_refused_total"
    assert _counter(gateway, refused, listener="PLAINTEXT", ip="<default>") == 2
    # Meanwhile another address connects, and so does a real client from 127.0.0.1 (its own
    # override of 100), whose bootstrap and broker connections both go through.
    assert answered("127.0.0.3", host, port)
    admin = AdminClient({"bootstrap.servers": str(gateway.bootstrap)})
    assert admin.list_topics(timeout=30).brokers
    # An override of 1 is that address's own limit, and has its own label.
    with connect_from("127.0.0.4", host, port) as first:
        assert api_versions(first)
        assert not answered("127.0.0.4", host, port)
    assert _counter(gateway, refused, listener="PLAINTEXT", ip="127.0.0.4") == 1
    # A closed connection frees its address's slot.
    held.pop().close()
    limits = gateway.gateway.connection_limits.quotas
    wait_for(lambda: limits.get("127.0.0.2") == 2, 10, "the close to be counted")
    assert answered("127.0.0.2", host, port)
    for sock in held:
        sock.close()
    gateway.stop()


@pytest.mark.parametrize(
    "where",
    [
        {"listener": {"max_connection_creation_rate": 10}},
        {"max_connection_creation_rate": 10},
    ],
    ids=["listener", "gateway-wide"],
)
def test_creation_rate_makes_the_acceptor_wait(
    tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway], where: dict[str, Any]
) -> None:
    """Kafka's max.connection.creation.rate, per listener (listener.name.X.) or broker-wide:
    over the rate, connections are not refused; the listener takes them more slowly."""
    rate = 10
    # Kafka measures creation rates over the client-quota windows, which the quota plug-in owns.
    windows = QuotaEnforcement(QuotaRuntime(QuotaSettings(window_num=2)))
    gateway = start_gateway(tansu.bootstrap, plugins=[windows], **where)
    host, port = gateway.bootstrap.host, gateway.bootstrap.port
    started = time.monotonic()
    socks = [connect_from("127.0.0.2", host, port, timeout_s=30) for _ in range(3 * rate)]
    assert all(api_versions(sock) for sock in socks)
    elapsed = time.monotonic() - started
    # A fresh 2 x 1 s window takes `rate` at once; the other 2 x `rate` wait their turn.
    assert 1.5 < elapsed < 6
    waits = "quotagate_connection_acceptor_waits_total"
    assert _counter(gateway, waits, listener="PLAINTEXT", reason="max.connection.creation.rate")
    assert _counter(gateway, "quotagate_connections_refused_total", listener="PLAINTEXT") == 0
    for sock in socks:
        sock.close()
    gateway.stop()


def test_listener_max_connections_makes_its_acceptor_wait(
    tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway]
) -> None:
    """Kafka's listener.name.X.max.connections: at the limit that listener stops accepting
    until one of its connections closes; connections from any address wait alike."""
    gateway = start_gateway(tansu.bootstrap, listener={"max_connections": 2})
    host, port = gateway.bootstrap.host, gateway.bootstrap.port
    first = connect_from("127.0.0.2", host, port)
    second = connect_from("127.0.0.3", host, port)
    assert api_versions(first) and api_versions(second)
    third = connect_from("127.0.0.4", host, port, timeout_s=1.0)
    with pytest.raises(TimeoutError):
        api_versions(third)
    first.close()
    third.settimeout(30)
    assert api_versions(third)
    waits = "quotagate_connection_acceptor_waits_total"
    assert _counter(gateway, waits, listener="PLAINTEXT", reason="max.connections") == 1
    for sock in (second, third):
        sock.close()
    gateway.stop()


def _rate_windows(limits: ConnectionLimits) -> int:
    return limits.quotas.broker_rate_metric().metrics[0].config.samples


def test_connection_rates_use_the_client_quota_windows() -> None:
    """Kafka measures connection rates over quota.window.num x quota.window.size.seconds; the
    [quotas] section is the quota plug-in's, and it sets the gateway's windows when attached."""
    sections = QuotaEnforcement.sections
    config = parse_config({"quotas": {"quota": {"window": {"num": 3}}}}, sections)
    limits = ConnectionLimits(config, GatewayMetrics())
    assert _rate_windows(limits) == 11  # Kafka's default, until a plug-in says otherwise
    QuotaEnforcement(QuotaRuntime(QuotaSettings.from_config(config))).attach(limits)
    assert _rate_windows(limits) == 3
    with pytest.raises(ConfigError, match=r"quota\.window\.size\.seconds = 0 is out of range"):
        QuotaEnforcement.configure(
            parse_config({"quotas": {"quota.window.size.seconds": 0}}, sections)
        )
    # The gateway alone owns no [quotas]: a section no plug-in declared is refused.
    with pytest.raises(ConfigError, match=r"unknown section \[quotas\]"):
        parse_config({"quotas": {}})


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            {"gateway": {"max.connections.per.ip": 0}},
            "may be 0 only with max.connections.per.ip.overrides",
        ),
        (
            {"gateway": {"max.connections.per.ip.overrides": "gateway.example.com:5"}},
            "is not an IP address (the gateway does not resolve host names",
        ),
        (
            {"gateway": {"max.connections.per.ip.overrides": "10.0.0.1"}},
            "is not ADDRESS:COUNT",
        ),
        (
            {"gateway": {"max.connections.per.ip.overrides": "10.0.0.1:many"}},
            "the count in '10.0.0.1:many' is not a whole number",
        ),
        (
            {"listeners": [{"listen": "127.0.0.1:9192", "max.connection.creation.rate": 0}]},
            "max.connection.creation.rate = 0 is out of range",
        ),
    ],
)
def test_config_errors_say_how_to_fix(toml: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(toml)
    assert message in str(raised.value)


def test_overrides_in_kafka_form_or_as_a_list() -> None:
    kafka_form = parse_config(
        {"gateway": {"max.connections.per.ip.overrides": "10.0.0.1:50, [::1]:7,::ffff:10.0.0.2:3"}}
    )
    listed = parse_config(
        {"gateway": {"max.connections.per.ip.overrides": ["10.0.0.1:50", "::1:7"]}}
    )
    assert kafka_form.max_connections_per_ip_overrides == (
        ("10.0.0.1", 50),
        ("::1", 7),
        ("10.0.0.2", 3),
    )
    assert listed.max_connections_per_ip_overrides == (("10.0.0.1", 50), ("::1", 7))


def test_zero_max_connections_per_ip_admits_only_the_overrides(
    tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway], wait_for: Any
) -> None:
    """Kafka's SocketServerTest.testZeroMaxConnectionsPerIp: max.connections.per.ip = 0 with
    an override of 5 for one address: five connections from it, the sixth is closed, a closed
    one frees a slot, and any other address is closed."""
    gateway = start_gateway(
        tansu.bootstrap,
        max_connections_per_ip=0,
        max_connections_per_ip_overrides=(("127.0.0.8", 5),),
    )
    host, port = gateway.bootstrap.host, gateway.bootstrap.port
    conns = [connect_from("127.0.0.8", host, port) for _ in range(5)]
    assert all(api_versions(sock) for sock in conns)
    assert not answered("127.0.0.8", host, port)
    conns.pop(0).close()
    limits = gateway.gateway.connection_limits.quotas
    wait_for(lambda: limits.get("127.0.0.8") == 4, 10, "the close to be counted")
    assert answered("127.0.0.8", host, port)
    assert not answered("127.0.0.9", host, port)
    for sock in conns:
        sock.close()
    gateway.stop()


async def test_held_sockets_are_closed_on_shutdown() -> None:
    """Kafka's SocketServerTest.testThrottledSocketsClosedOnShutdown: a connection held for
    its IP's rate does not outlive the gateway's shutdown, however long its throttle."""
    config = parse_config({})
    limits = ConnectionLimits(config, GatewayMetrics())
    client, server = socket.socketpair()
    client.settimeout(5)
    limits.hold(server, "PLAINTEXT", "127.0.0.1", throttle_ms=600_000)
    limits.close()
    assert client.recv(1) == b""
    client.close()


def test_a_bare_per_ip_key_next_to_max_connections_says_to_quote_it(tmp_path: Path) -> None:
    path = tmp_path / "quotagate.toml"
    path.write_text("[gateway]\nmax.connections = 10\nmax.connections.per.ip = 2\n")
    with pytest.raises(ConfigError, match=r'must be quoted: write "max\.connections\.per\.ip"'):
        load_config(path)
    path.write_text('[gateway]\nmax.connections = 10\n"max.connections.per.ip" = 2\n')
    config = load_config(path)
    assert (config.max_connections, config.max_connections_per_ip) == (10, 2)
