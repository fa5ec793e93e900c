"""The gateway in front of Apache Kafka's own TLS and SASL listeners: Kafka decides.

The session's Kafka cluster (support/kafka_cluster.py) serves SSL (client certificates
requested) and SASL_SSL with PLAIN, SCRAM-SHA-512 (users made through Kafka's admin API) and
OAUTHBEARER (Kafka's own JWT validator against the test's JWKS). The gateway reaches it with
its own ``[upstream]`` security; on a passthrough listener the clients' own SASL exchanges go
to Kafka, which accepts or refuses them. No password, secret or token reaches a log line.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.security import UpstreamSecurity, parse_upstream_security
from quotagate.store.quotas import Change
from support import bounds
from support.clients import authentication_error, confluent_round_trip, new_topic
from support.gateways import gateway_config, quota_gateway
from support.kafka_cluster import PLAIN_USERS, REAUTH_MS, SCRAM_USERS, KafkaCluster
from support.log_lines import discovery_refusals, upstream_reauthentications
from support.upstreams import Upstream

pytestmark = pytest.mark.integration


def _upstream(kafka: KafkaCluster, listener: str) -> Upstream:
    return Upstream("kafka", kafka.bootstrap(listener), tuple(kafka.nodes))


def _security(kafka: KafkaCluster, protocol: str, **keys: str) -> UpstreamSecurity:
    return parse_upstream_security(
        {"security.protocol": protocol, "ssl.ca.location": str(kafka.certificates.certificate)}
        | keys
    )


def _round_trip(gateway: BackgroundGateway, wait_for: Any, label: str) -> None:
    plain = {"bootstrap.servers": str(gateway.bootstrap)}
    topic = new_topic(plain, f"kafka-{label}")
    values = [f"{label}-{i}".encode() for i in range(20)]
    received = confluent_round_trip(plain, topic, values, wait_for, skip_errors=True)
    assert sorted(received) == sorted(values)


def _principals(kafka: KafkaCluster) -> str:
    """Kafka's request logs (KIP-673 JSON names each request's principal)."""
    return "".join(node.request_log.read_text(errors="replace") for node in kafka.nodes.values())


def test_over_kafkas_tls_listener(
    kafka: KafkaCluster, start_gateway: Callable[..., BackgroundGateway], wait_for: Any
) -> None:
    gateway = start_gateway(_upstream(kafka, "SSL"), upstream_security=_security(kafka, "SSL"))
    _round_trip(gateway, wait_for, "tls")


def test_the_gateways_client_certificate_is_its_principal_at_kafka(
    kafka: KafkaCluster, start_gateway: Callable[..., BackgroundGateway], wait_for: Any
) -> None:
    name = f"gateway-{secrets.token_hex(3)}"
    leaf = kafka.certificates.client(f"CN={name},O=quotagate", name)
    security = _security(
        kafka,
        "SSL",
        **{"ssl.certificate.location": str(leaf.certificate), "ssl.key.location": str(leaf.key)},
    )
    gateway = start_gateway(_upstream(kafka, "SSL"), upstream_security=security)
    _round_trip(gateway, wait_for, "mtls")
    wait_for(lambda: f"User:CN={name},O=quotagate" in _principals(kafka), 10, "the principal")


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", "alice"), ("SCRAM-SHA-512", "carol")])
def test_the_gateway_authenticates_to_kafka(
    kafka: KafkaCluster,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    mechanism: str,
    user: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    password = {**PLAIN_USERS, **SCRAM_USERS}[user]
    security = _security(
        kafka,
        "SASL_SSL",
        **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password},
    )
    gateway = start_gateway(_upstream(kafka, "SASL_SSL"), upstream_security=security)
    _round_trip(gateway, wait_for, mechanism.lower())
    assert f'"principal":"User:{user}"' in _principals(kafka)
    assert password not in caplog.text


def test_the_gateway_takes_an_oauth_token_kafka_validates(
    kafka: KafkaCluster,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    client, secret = f"gateway-{secrets.token_hex(3)}", secrets.token_urlsafe(16)
    kafka.identity.clients[client] = secret
    security = _security(
        kafka,
        "SASL_SSL",
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": kafka.identity.token_url,
            "sasl.oauthbearer.client.id": client,
            "sasl.oauthbearer.client.secret": secret,
        },
    )
    gateway = start_gateway(_upstream(kafka, "SASL_SSL"), upstream_security=security)
    _round_trip(gateway, wait_for, "oauth")
    assert f'"principal":"User:{client}"' in _principals(kafka)
    kafka.identity.assert_not_logged(caplog.text)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_password_kafka_refuses_is_an_authentication_error(
    kafka: KafkaCluster,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    mechanism: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    wrong = f"not-{secrets.token_hex(4)}"
    user = "alice" if mechanism == "PLAIN" else "carol"
    security = _security(
        kafka,
        "SASL_SSL",
        **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": wrong},
    )
    start_gateway(_upstream(kafka, "SASL_SSL"), upstream_security=security)
    wait_for(lambda: len(discovery_refusals(caplog)) >= 2, 30, "two refused discovery attempts")
    assert all("SASL: the broker refused the" in line for line in discovery_refusals(caplog))
    assert wrong not in caplog.text


# -- passthrough: the clients' own SASL, decided by Kafka -------------------------------------

QUOTA = 100_000
RECORD = b"v" * 10_000
BATCH_BYTES = 20_000
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


@pytest.fixture(scope="module")
def passthrough(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A SASL_PLAINTEXT passthrough listener in front of Kafka's SASL_SSL listener, the
    gateway's own link as ``admin``; a producer_byte_rate on User:alice."""
    security = _security(
        kafka,
        "SASL_SSL",
        **{"sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"},
    )
    config = gateway_config(
        _upstream(kafka, "SASL_SSL"),
        security_protocol="SASL_PLAINTEXT",
        listener={"sasl_mode": "passthrough"},
        upstream_security=security,
        store_path=str(tmp_path_factory.mktemp("kafka-passthrough") / "front.db"),
        extra={"quotas": WINDOWS},
    )
    with quota_gateway(
        config, [Change({"user": "alice"}, "producer_byte_rate", float(QUOTA))]
    ) as front:
        yield front.background


def _client(gateway: BackgroundGateway, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": str(gateway.bootstrap),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", "bob"), ("SCRAM-SHA-512", "dave")])
def test_passthrough_clients_are_decided_by_kafka(
    passthrough: BackgroundGateway, kafka: KafkaCluster, wait_for: Any, mechanism: str, user: str
) -> None:
    password = {**PLAIN_USERS, **SCRAM_USERS}[user]
    config = _client(passthrough, mechanism, user, password)
    topic = new_topic(config, f"passthrough-{mechanism.lower()}")
    values = [f"{user}-{i}".encode() for i in range(20)]
    assert sorted(confluent_round_trip(config, topic, values, wait_for)) == sorted(values)
    assert f'"principal":"User:{user}"' in _principals(kafka)


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", "bob"), ("SCRAM-SHA-512", "dave")])
def test_passthrough_a_wrong_password_is_refused_by_kafka(
    passthrough: BackgroundGateway, wait_for: Any, mechanism: str, user: str
) -> None:
    config = _client(passthrough, mechanism, user, "wrong-password")
    assert "Authentication failed" in authentication_error(config, wait_for)


def test_passthrough_alice_is_held_to_her_quota(passthrough: BackgroundGateway) -> None:
    config = _client(passthrough, "PLAIN", "alice", PLAIN_USERS["alice"])
    topic = new_topic(config, "passthrough-quota")
    producer = Producer({**config, "batch.size": BATCH_BYTES, "linger.ms": 0, "acks": 1})
    started = time.monotonic()
    for _ in range(500_000 // len(RECORD)):
        producer.produce(topic, RECORD)
        producer.poll(0)
    assert producer.flush(60) == 0
    seconds = time.monotonic() - started
    rate = 500_000 / seconds
    ceiling = bounds.ceiling(
        seconds, WINDOWS, quota=QUOTA, in_flight_bytes=BATCH_BYTES, from_first_request=True
    )
    assert 0.5 * QUOTA <= rate <= ceiling * QUOTA, f"{rate:.0f} B/s, quota {QUOTA}"


# -- KIP-368: Kafka's connections.max.reauth.ms --------------------------------------------


def test_the_gateways_links_reauthenticate_before_kafka_closes_them(
    kafka: KafkaCluster,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka's REAUTH listener ends every SASL session after ``REAUTH_MS``: a client that has
    not re-authenticated by then is disconnected. A producer and a consumer run through the
    gateway for several sessions' length: the gateway's upstream links re-authenticate in time
    (each several times), no connection is closed, every message comes back once, in order."""
    caplog.set_level(logging.DEBUG, logger="quotagate")
    security = _security(
        kafka,
        "SASL_SSL",
        **{
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": "carol-secret",
        },
    )
    gateway = start_gateway(_upstream(kafka, "REAUTH"), upstream_security=security)
    config = {"bootstrap.servers": str(gateway.bootstrap)}
    topic = new_topic(config, "kafka-reauth")
    producer = Producer({**config, "acks": "all", "linger.ms": 0})
    # A link re-authenticates once its forwarded requests are answered (as Kafka's clients
    # do), so a fetch waiting at the broker delays it: short waits keep it inside the 5-15 %
    # of the session KIP-368 leaves.
    consumer = Consumer(
        {
            **config,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    sent: list[bytes] = []
    received: list[bytes] = []

    def run(seconds: float, settled: Callable[[], bool] = lambda: False) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not settled():
            sent.append(f"r-{len(sent):05d}".encode())
            producer.produce(topic, sent[-1])
            producer.poll(0)
            for message in consumer.consume(100, 0.02):
                assert message.error() is None, message.error()
                received.append(message.value())

    # Measured once the clients settled: the first message back, and a second more, in
    # which librdkafka drops its bootstrap connections.
    run(30, settled=lambda: bool(received))
    run(1.0)
    caplog.clear()
    run(2.2 * REAUTH_MS / 1000)
    run(30, settled=lambda: len(received) >= len(sent) - 1)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("quotagate")]
    assert producer.flush(30) == 0
    consumer.close()
    assert received == sent[: len(received)] and len(sent) - len(received) <= 1
    assert len(sent) > 50
    closed = [line for line in lines if "connection_closed" in line or "expired" in line]
    assert not closed, closed
    renewed = upstream_reauthentications(lines)
    assert renewed and max(renewed.values()) >= 2, renewed
    assert "carol-secret" not in caplog.text
