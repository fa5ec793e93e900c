"""The gateway authenticating to its upstream with its own ``[upstream]`` credentials.

tansu has no SASL users we could create, so the broker that decides is a second quotagate in
terminate mode (SCRAM and PLAIN against its credential store) in front of tansu; over
SASL_PLAINTEXT and SASL_SSL. A wrong password is an authentication error on every attempt and
no password ever appears in a log line.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.upstream_security import UpstreamSecurity, parse_upstream_security
from quotagate.store.credentials import CredentialStore
from support.certificates import CertificateAuthority

pytestmark = pytest.mark.integration

GATEWAY_USER, GATEWAY_PASSWORD = "gateway", "Gw-pa55-=,secret"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("sasl-upstream-ca"))


@pytest.fixture(scope="module")
def deciders(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
    ca: CertificateAuthority,
) -> Iterator[dict[str, BackgroundGateway]]:
    """Terminate-mode gateways in front of tansu: the upstream that checks passwords."""
    store = CredentialStore.open(tmp_path_factory.mktemp("decider") / "users.db")
    store.set_password(GATEWAY_USER, GATEWAY_PASSWORD, iterations=4096)
    factory = SaslAuthenticatorFactory(store)
    leaf = ca.issue("localhost", dns=("localhost",))
    yield {
        "SASL_PLAINTEXT": start_module_gateway(
            tansu.bootstrap, security_protocol="SASL_PLAINTEXT", authenticator_factory=factory
        ),
        "SASL_SSL": start_module_gateway(
            tansu.bootstrap,
            security_protocol="SASL_SSL",
            listener={
                "ssl_certificate_location": str(leaf.certificate),
                "ssl_key_location": str(leaf.key),
                "advertised_host": "localhost",
            },
            authenticator_factory=factory,
        ),
    }
    store.close()


def upstream_spec(
    protocol: str, mechanism: str, password: str, ca: CertificateAuthority
) -> UpstreamSecurity:
    keys = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": GATEWAY_USER,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        keys["ssl.ca.location"] = str(ca.certificate)
    return parse_upstream_security(keys)


def decider_address(decider: BackgroundGateway, protocol: str) -> str:
    address = decider.bootstrap
    return f"localhost:{address.port}" if protocol == "SASL_SSL" else str(address)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_gateway_authenticates_to_its_upstream(
    deciders: dict[str, BackgroundGateway],
    start_gateway: Callable[..., BackgroundGateway],
    ca: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    protocol: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    gateway = start_gateway(
        decider_address(deciders[protocol], protocol),
        upstream_security=upstream_spec(protocol, mechanism, GATEWAY_PASSWORD, ca),
    )
    bootstrap = str(gateway.bootstrap)
    topic = f"gw-sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [f"{mechanism}-{i}".encode() for i in range(20)]
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}"})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    received: list[bytes] = []

    def drained() -> bool:
        received.extend(m.value() for m in consumer.consume(100, 1.0) if m.error() is None)
        return len(received) >= len(values)

    wait_for(drained, 30, "every message back")
    consumer.close()
    assert sorted(received) == sorted(values)
    # The decider saw the gateway's own principal on the client links.
    assert any(f"principal=User:{GATEWAY_USER}" in r.getMessage() for r in caplog.records)
    assert GATEWAY_PASSWORD not in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_an_authentication_error_every_time(
    deciders: dict[str, BackgroundGateway],
    start_gateway: Callable[..., BackgroundGateway],
    ca: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mechanism: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    monkeypatch.setenv("QUOTAGATE_TEST_UPSTREAM_PASSWORD", "not-the-Password-42")
    start_gateway(
        str(deciders["SASL_PLAINTEXT"].bootstrap),
        upstream_security=upstream_spec(
            "SASL_PLAINTEXT", mechanism, "${env:QUOTAGATE_TEST_UPSTREAM_PASSWORD}", ca
        ),
    )

    def refusals() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.ERROR and "upstream_discovery_failed" in r.getMessage()
        ]

    wait_for(lambda: len(refusals()) >= 2, 20, "two refused discovery attempts")
    assert all("SASL: the broker refused the" in line for line in refusals())
    assert "not-the-Password-42" not in caplog.text
