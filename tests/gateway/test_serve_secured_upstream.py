"""``quotagate serve`` with the issue's exact keys, as a person would run it: ``[upstream]``
``security.protocol = "SSL"``, ``ssl.ca.location``, ``sasl.mechanism = "SCRAM-SHA-512"``,
``sasl.username``, ``sasl.password = "${env:NAME}"``; an SSL listener with
``ssl.client.auth = "required"``, ``ssl.ca.location`` and ``ssl.principal.mapping.rules``; and
a SASL_PLAINTEXT listener with ``sasl.mode = "passthrough"``. The upstream that decides is a
quotagate in terminate mode on SASL_SSL in front of tansu. No password appears anywhere in the
process's output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.embedded import TansuBroker, free_port
from quotagate.store.credentials import CredentialStore
from support.certificates import CertificateAuthority

pytestmark = pytest.mark.integration

PASSWORDS = {"alice": "Alice-serve-pw", "gateway": "Gateway-serve-pw"}


def test_serve_with_a_tls_upstream_an_mtls_listener_and_a_passthrough_listener(
    tmp_path: Path,
    tansu: TansuBroker,
    start_gateway: Callable[..., BackgroundGateway],
    wait_for: Any,
) -> None:
    ca = CertificateAuthority(tmp_path)
    leaf = ca.issue("localhost", dns=("localhost",))
    users = CredentialStore.open(tmp_path / "decider.db")
    for name, password in PASSWORDS.items():
        users.set_password(name, password, iterations=4096)
    decider = start_gateway(
        tansu.bootstrap,
        security_protocol="SASL_SSL",
        listener={
            "ssl_certificate_location": str(leaf.certificate),
            "ssl_key_location": str(leaf.key),
            "advertised_host": "localhost",
        },
        authenticator_factory=SaslAuthenticatorFactory(users),
    )
    port, mtls_port = free_port(), free_port()
    listener_leaf = ca.server("listener")
    bob = ca.client("CN=bob,OU=eng,O=corp", "bob")
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[upstream]\n"
        f'bootstrap.servers = "localhost:{decider.bootstrap.port}"\n'
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
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "quotagate"), "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "QUOTAGATE_UPSTREAM_PASSWORD": PASSWORDS["gateway"],
        },
        text=True,
    )
    try:
        client = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": PASSWORDS["alice"],
        }
        admin = AdminClient(client)
        wait_for(lambda: admin.list_topics(timeout=5).brokers, 60, "metadata through serve")
        topic = f"serve-{uuid.uuid4().hex[:8]}"
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(30)
        producer = Producer({**client, "acks": "all"})
        values = [f"v{i}".encode() for i in range(10)]
        for value in values:
            producer.produce(topic, value=value)
        assert producer.flush(30) == 0
        consumer = Consumer({**client, "group.id": f"g-{topic}"})
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        received: list[bytes] = []

        def drained() -> bool:
            received.extend(m.value() for m in consumer.consume(100, 1.0) if m.error() is None)
            return len(received) >= len(values)

        wait_for(drained, 30, "every message back")
        consumer.close()
        errors: list[KafkaError] = []
        refused = Producer({**client, "sasl.password": "wrong", "error_cb": errors.append})

        def authentication_failed() -> bool:
            refused.poll(0.2)
            return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

        wait_for(authentication_failed, 30, "an authentication failure")
        refused.flush(0)
        # The mTLS listener of the same process, through the same secured upstream.
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
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        users.close()
    assert "event=upstream_config" in output and "SASL_SSL" in output
    assert "principal=User:alice" in output
    assert "event=tls_principal" in output and "principal=User:bob" in output
    for password in PASSWORDS.values():
        assert password not in output
