"""SASL through the real gateway to a real tansu broker, with real clients.

The gateway terminates SASL (tansu has none): PLAIN and SCRAM-SHA-256/512 must let
confluent-kafka and kafka-python produce and consume with the right password, refuse them with
the wrong one, and do both over SASL_PLAINTEXT and SASL_SSL.
"""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaTimeoutError
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1
from kio.serial import entity_reader, entity_writer

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.embedded import TansuBroker
from quotagate.store.credentials import CredentialStore

pytestmark = pytest.mark.integration

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "alice", "alice-Pa55word"
SECURITY = ("SASL_PLAINTEXT", "SASL_SSL")


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CredentialStore]:
    store = CredentialStore.open(tmp_path_factory.mktemp("sasl-e2e") / "gateway.db")
    store.set_password(USER, PASSWORD, iterations=4096)
    yield store
    store.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "gateway.crt", directory / "gateway.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def sasl_gateways(
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
    credentials: CredentialStore,
    certificate: tuple[Path, Path],
) -> dict[str, BackgroundGateway]:
    factory = SaslAuthenticatorFactory(credentials)
    cert, key = certificate
    return {
        "SASL_PLAINTEXT": start_module_gateway(
            tansu.bootstrap, security_protocol="SASL_PLAINTEXT", authenticator_factory=factory
        ),
        "SASL_SSL": start_module_gateway(
            tansu.bootstrap,
            security_protocol="SASL_SSL",
            listener={"ssl_certificate_location": str(cert), "ssl_key_location": str(key)},
            authenticator_factory=factory,
        ),
    }


def confluent_config(
    gateway: BackgroundGateway, security: str, mechanism: str, password: str, cert: Path
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": str(gateway.bootstrap),
        "security.protocol": security,
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
    }
    if security == "SASL_SSL":
        config["ssl.ca.location"] = str(cert)
    return config


def kafka_python_config(
    gateway: BackgroundGateway, security: str, mechanism: str, password: str, cert: Path
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap_servers": str(gateway.bootstrap),
        "security_protocol": security,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": password,
    }
    if security == "SASL_SSL":
        config["ssl_cafile"] = str(cert)
    return config


def create_topic(config: dict[str, Any]) -> str:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    for future in admin.create_topics([CkNewTopic(topic, 1, 1)]).values():
        future.result(30)
    return topic


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_authenticates(
    sasl_gateways: dict[str, BackgroundGateway],
    certificate: tuple[Path, Path],
    wait_for: Any,
    caplog: pytest.LogCaptureFixture,
    security: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = sasl_gateways[security]
    config = confluent_config(gateway, security, mechanism, PASSWORD, certificate[0])
    topic = create_topic(config)
    values = {f"{mechanism}-{i}".encode() for i in range(100)}
    producer = Producer({**config, "acks": "all"})
    for value in sorted(values):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0

    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    received: list[bytes] = []

    def drained() -> bool:
        for message in consumer.consume(100, 1.0):
            assert message.error() is None, message.error()
            received.append(message.value())
        return len(received) >= len(values)

    wait_for(drained, 30, "all messages")
    consumer.close()
    assert sorted(received) == sorted(values)
    principals = {getattr(r, "msg", None) and str(r.msg) for r in caplog.records}
    assert any(p and "principal=User:alice" in p for p in principals)


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_wrong_password_is_refused(
    sasl_gateways: dict[str, BackgroundGateway],
    certificate: tuple[Path, Path],
    wait_for: Any,
    security: str,
    mechanism: str,
) -> None:
    errors: list[KafkaError] = []
    config = confluent_config(sasl_gateways[security], security, mechanism, "nope", certificate[0])
    producer = Producer({**config, "error_cb": errors.append})

    def refused() -> bool:
        producer.poll(0.2)
        return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

    wait_for(refused, 30, "an authentication error")
    message = next(e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed" in message
    if mechanism == "PLAIN":
        assert "Invalid username or password" in message
    else:
        assert f"invalid credentials with SASL mechanism {mechanism}" in message
    producer.flush(0)


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates(
    sasl_gateways: dict[str, BackgroundGateway],
    certificate: tuple[Path, Path],
    security: str,
    mechanism: str,
) -> None:
    gateway = sasl_gateways[security]
    topic = create_topic(confluent_config(gateway, security, mechanism, PASSWORD, certificate[0]))
    config = kafka_python_config(gateway, security, mechanism, PASSWORD, certificate[0])
    producer = KafkaProducer(**config, acks="all")
    values = [f"kp-{mechanism}-{i}".encode() for i in range(50)]
    futures = [producer.send(topic, value) for value in values]
    for future in futures:
        future.get(timeout=30)
    producer.close()

    consumer = KafkaConsumer(**config, enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([KpTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    received = []
    for record in consumer:
        received.append(record.value)
        if len(received) == len(values):
            break
    consumer.close()
    assert received == values


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_wrong_password_is_refused(
    sasl_gateways: dict[str, BackgroundGateway],
    certificate: tuple[Path, Path],
    caplog: pytest.LogCaptureFixture,
    security: str,
    mechanism: str,
) -> None:
    # kafka-python keeps retrying a bootstrap that failed authentication until its bootstrap
    # timeout and then reports only the timeout; the cause is in its log.
    caplog.set_level(logging.WARNING, logger="kafka")
    gateway = sasl_gateways[security]
    config = kafka_python_config(gateway, security, mechanism, "nope", certificate[0])
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(**config, bootstrap_timeout_ms=2000)
    causes = [
        r.getMessage()
        for r in caplog.records
        if "SaslAuthenticationFailedError" in str(r.msg)
        or "SaslAuthenticationFailedError" in r.getMessage()
    ]
    assert causes, "kafka-python never saw SASL_AUTHENTICATION_FAILED"
    expected = (
        "Invalid username or password"
        if mechanism == "PLAIN"
        else f"invalid credentials with SASL mechanism {mechanism}"
    )
    assert all("[Error 58]" in cause and expected in cause for cause in causes)


# ---- the wire, byte by byte, through the real gateway ---------------------------------------


def send_request(sock: socket.socket, body: Any, correlation_id: int) -> None:
    header_type = type(body).__header_schema__
    buffer = bytearray()

    class _Sink:
        def write(self, data: bytes) -> None:
            buffer.extend(data)

    sink: Any = _Sink()
    entity_writer(header_type)(
        sink,
        header_type(
            request_api_key=type(body).__api_key__,
            request_api_version=type(body).__version__,
            correlation_id=correlation_id,
            client_id="raw",
        ),
    )
    entity_writer(type(body))(sink, body)
    sock.sendall(struct.pack(">i", len(buffer)) + bytes(buffer))


def read_frame(sock: socket.socket) -> bytes | None:
    """One frame, or None when the gateway closed the connection."""
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    (size,) = struct.unpack(">i", data)
    payload = b""
    while len(payload) < size:
        chunk = sock.recv(size - len(payload))
        if not chunk:
            return None
        payload += chunk
    return payload


def connect(gateway: BackgroundGateway) -> socket.socket:
    address = gateway.bootstrap
    sock = socket.create_connection((address.host, address.port), timeout=15)
    return sock


def test_a_request_before_authentication_is_answered_by_a_close(
    sasl_gateways: dict[str, BackgroundGateway],
) -> None:
    with connect(sasl_gateways["SASL_PLAINTEXT"]) as sock:
        send_request(
            sock,
            metadata_v12.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            7,
        )
        assert read_frame(sock) is None


def test_an_unsupported_mechanism_lists_the_enabled_ones_then_closes(
    sasl_gateways: dict[str, BackgroundGateway],
) -> None:
    with connect(sasl_gateways["SASL_PLAINTEXT"]) as sock:
        send_request(sock, handshake_v1.SaslHandshakeRequest(mechanism="GSSAPI"), 3)
        frame = read_frame(sock)
        assert frame is not None
        header, offset = entity_reader(handshake_v1.SaslHandshakeResponse.__header_schema__)(
            frame, 0
        )
        body, _ = entity_reader(handshake_v1.SaslHandshakeResponse)(frame, offset)
        assert header.correlation_id == 3
        assert body.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(body.mechanisms) == set(MECHANISMS)
        assert read_frame(sock) is None


def test_handshake_v0_then_a_bare_plain_token(
    sasl_gateways: dict[str, BackgroundGateway],
) -> None:
    with connect(sasl_gateways["SASL_PLAINTEXT"]) as sock:
        send_request(sock, handshake_v0.SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert read_frame(sock) is not None
        token = f"\x00{USER}\x00{PASSWORD}".encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(sock) == b""  # PLAIN's empty server reply, length-prefixed
        # Authenticated: a real request now goes through to the broker.
        send_request(
            sock,
            metadata_v12.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            2,
        )
        frame = read_frame(sock)
        assert frame is not None
        assert struct.unpack(">i", frame[:4])[0] == 2

    with connect(sasl_gateways["SASL_PLAINTEXT"]) as sock:
        send_request(sock, handshake_v0.SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert read_frame(sock) is not None
        token = f"\x00{USER}\x00wrong".encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert read_frame(sock) is None
