"""``quotagate serve`` with the issue's exact keys, as a person would run it: ``[upstream]``
``security.protocol = "SSL"``, ``ssl.ca.location``, ``sasl.mechanism = "SCRAM-SHA-512"``,
``sasl.username``, ``sasl.password = "${env:NAME}"``; an SSL listener with
``ssl.client.auth = "required"``, ``ssl.ca.location`` and ``ssl.principal.mapping.rules``; and
a SASL_PLAINTEXT listener with ``sasl.mode = "passthrough"``. The upstream that decides is a
quotagate in terminate mode on SASL_SSL in front of tansu. No password appears anywhere in the
process's output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker, free_port
from quotagate.gateway.embedded.background import BackgroundGateway
from support.certificates import CertificateAuthority
from support.clients import authentication_error, confluent_round_trip, new_topic
from support.sasl_users import sasl_users
from support.served import Served

pytestmark = pytest.mark.integration

PASSWORDS = {"alice": "Alice-serve-pw", "gateway": "Gateway-serve-pw"}


def test_serve_with_a_tls_upstream_an_mtls_listener_and_a_passthrough_listener(
    tmp_path: Path,
    tansu: TansuBroker,
    start_gateway: Callable[..., BackgroundGateway],
    wait_for: Any,
) -> None:
    ca = CertificateAuthority(tmp_path)
    with sasl_users(tmp_path / "decider.db", PASSWORDS) as users:
        decider = start_gateway(
            tansu.bootstrap,
            security_protocol="SASL_SSL",
            listener=ca.issue("localhost", dns=("localhost",)).listener_fields(
                advertised_host="localhost"
            ),
            authenticator_factory=SaslAuthenticatorFactory(users),
        )
        port, mtls_port = free_port(), free_port()
        config = _gateway_toml(tmp_path, ca, decider.bootstrap.port, port, mtls_port)
        output = _serve(config, lambda: _use(ca, port, mtls_port, wait_for))
    assert "event=upstream_config" in output and "SASL_SSL" in output
    assert "principal=User:alice" in output
    assert "event=tls_principal" in output and "principal=User:bob" in output
    for password in PASSWORDS.values():
        assert password not in output


def _gateway_toml(
    tmp_path: Path, ca: CertificateAuthority, upstream_port: int, port: int, mtls_port: int
) -> Path:
    listener_leaf = ca.server("listener")
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[upstream]\n"
        f'bootstrap.servers = "localhost:{upstream_port}"\n'
        'security.protocol = "SSL"\n'
        f'ssl.ca.location = "{ca.certificate}"\n'
        'sasl.mechanism = "SCRAM-SHA-512"\n'
        'sasl.username = "gateway"\n'
        'sasl.password = "${env:QUOTAGATE_UPSTREAM_PASSWORD}"\n'
        "\n[[listeners]]\n"
        'name = "CLIENTS"\n'
        f'listen = "127.0.0.1:{port}"\n'
        'security.protocol = "SASL_PLAINTEXT"\n'
        'sasl.mode = "passthrough"\n'
        f"broker.port.start = {free_port()}\n"
        "broker.node.id.start = 111\n"
        "broker.port.count = 1\n"
        "\n[[listeners]]\n"
        'name = "MTLS"\n'
        f'listen = "127.0.0.1:{mtls_port}"\n'
        'security.protocol = "SSL"\n'
        f'ssl.certificate.location = "{listener_leaf.certificate}"\n'
        f'ssl.key.location = "{listener_leaf.key}"\n'
        'ssl.client.auth = "required"\n'
        f'ssl.ca.location = "{ca.certificate}"\n'
        'ssl.principal.mapping.rules = "RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT"\n'
        f"broker.port.start = {free_port()}\n"
        "broker.node.id.start = 111\n"
        "broker.port.count = 1\n"
        f'\n[store]\npath = "{tmp_path / "front.db"}"\n',
        encoding="utf-8",
    )
    return config


def _serve(config: Path, use: Callable[[], None]) -> str:
    """``quotagate serve --config`` while ``use()`` runs; all it printed, once stopped."""
    served = Served(config, env={"QUOTAGATE_UPSTREAM_PASSWORD": PASSWORDS["gateway"]})
    try:
        use()
    finally:
        served.stop()
    return served.output()


def _use(ca: CertificateAuthority, port: int, mtls_port: int, wait_for: Any) -> None:
    """alice through the passthrough listener (and refused with a wrong password), bob by his
    certificate through the mTLS listener."""
    client = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": PASSWORDS["alice"],
    }
    admin = AdminClient(client)

    def answered() -> bool:
        # A process just started, on a loaded machine: refused or cut connections until then.
        try:
            return bool(admin.list_topics(timeout=5).brokers)
        except KafkaException:
            return False

    wait_for(answered, 60, "metadata through serve")
    topic = new_topic(client, "serve")
    values = [f"v{i}".encode() for i in range(10)]
    confluent_round_trip(client, topic, values, wait_for, skip_errors=True)
    authentication_error({**client, "sasl.password": "wrong"}, wait_for)
    # The mTLS listener of the same process, through the same secured upstream.
    bob = ca.client("CN=bob,OU=eng,O=corp", "bob")
    by_certificate = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{mtls_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.certificate),
            "ssl.certificate.location": str(bob.certificate),
            "ssl.key.location": str(bob.key),
            "acks": "all",
        }
    )
    by_certificate.produce(topic, value=b"from bob's certificate")
    assert by_certificate.flush(30) == 0
