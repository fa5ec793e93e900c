"""SASL through the real gateway to a real tansu broker, with real clients.

The gateway terminates SASL (tansu has none): PLAIN and SCRAM-SHA-256/512 must let
confluent-kafka and kafka-python produce and consume with the right password, refuse them with
the wrong one, and do both over SASL_PLAINTEXT and SASL_SSL.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1
from kio.serial import entity_reader

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol import codec
from quotagate.store.credentials import CredentialStore
from support import raw_socket
from support.certificates import CertificateAuthority
from support.clients import (
    authentication_error,
    confluent_round_trip,
    kafka_python_names,
    kafka_python_round_trip,
    new_topic,
)
from support.sasl_users import sasl_users

pytestmark = pytest.mark.integration

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "alice", "alice-Pa55word"
SECURITY = ("SASL_PLAINTEXT", "SASL_SSL")


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CredentialStore]:
    with sasl_users(tmp_path_factory.mktemp("sasl-e2e") / "gateway.db", {USER: PASSWORD}) as store:
        yield store


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    """The CA of the SASL_SSL listener's certificate (what its clients trust)."""
    return CertificateAuthority(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def sasl_gateways(
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
    credentials: CredentialStore,
    ca: CertificateAuthority,
) -> dict[str, BackgroundGateway]:
    factory = SaslAuthenticatorFactory(credentials)
    return {
        "SASL_PLAINTEXT": start_module_gateway(
            tansu.bootstrap, security_protocol="SASL_PLAINTEXT", authenticator_factory=factory
        ),
        "SASL_SSL": start_module_gateway(
            tansu.bootstrap,
            security_protocol="SASL_SSL",
            listener=ca.server().listener_fields(),
            authenticator_factory=factory,
        ),
    }


def confluent_config(
    gateway: BackgroundGateway,
    security: str,
    mechanism: str,
    password: str,
    ca: CertificateAuthority,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": str(gateway.bootstrap),
        "security.protocol": security,
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
    }
    if security == "SASL_SSL":
        config["ssl.ca.location"] = str(ca.certificate)
    return config


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_authenticates(
    sasl_gateways: dict[str, BackgroundGateway],
    ca: CertificateAuthority,
    wait_for: Any,
    caplog: pytest.LogCaptureFixture,
    security: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    config = confluent_config(sasl_gateways[security], security, mechanism, PASSWORD, ca)
    values = [f"{mechanism}-{i}".encode() for i in range(100)]
    received = confluent_round_trip(config, new_topic(config, "sasl"), values, wait_for)
    assert sorted(received) == sorted(values)
    principals = {getattr(r, "msg", None) and str(r.msg) for r in caplog.records}
    assert any(p and "principal=User:alice" in p for p in principals)


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_wrong_password_is_refused(
    sasl_gateways: dict[str, BackgroundGateway],
    ca: CertificateAuthority,
    wait_for: Any,
    security: str,
    mechanism: str,
) -> None:
    config = confluent_config(sasl_gateways[security], security, mechanism, "nope", ca)
    message = authentication_error(config, wait_for)
    assert "Authentication failed" in message
    if mechanism == "PLAIN":
        assert "Invalid username or password" in message
    else:
        assert f"invalid credentials with SASL mechanism {mechanism}" in message


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_client_retrying_a_wrong_password_is_one_log_line_and_counted(
    start_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
    credentials: CredentialStore,
    ca: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    mechanism: str,
) -> None:
    """librdkafka retries a refused login for ever: the operator's log gets one line naming
    the client, the listener, the mechanism and why; the counter gets every refusal."""
    caplog.set_level(logging.DEBUG, logger="quotagate")
    gateway = start_gateway(
        tansu.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        authenticator_factory=SaslAuthenticatorFactory(credentials),
    )
    wrong = "wrong-Pa55word-of-alice"
    config = {
        **confluent_config(gateway, "SASL_PLAINTEXT", mechanism, wrong, ca),
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 100,
    }
    registry = gateway.gateway.metrics.registry
    labels = {"listener": "SASL_PLAINTEXT", "reason": "sasl_authentication_failed"}

    def refusals() -> float:
        return registry.get_sample_value("quotagate_authentication_refusals_total", labels) or 0

    producer = Producer({**config, "error_cb": lambda _: None})
    try:
        wait_for(lambda: producer.poll(0.1) or refusals() >= 10, 60, "ten refusals")
    finally:
        producer.flush(0)
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    refused = [m for level, m in messages if level >= logging.INFO and "event=" in m]
    refused = [m for m in refused if "authentication" in m or "refus" in m]
    assert len(refused) == 1, refused
    (line,) = refused
    assert line.startswith("event=authentication_failed listener=SASL_PLAINTEXT client=127.0.0.1:")
    assert f"mechanism={mechanism} reason=sasl_authentication_failed" in line
    assert "Invalid" in line
    assert [level for level, m in messages if m == line] == [logging.WARNING]
    assert not [m for _, m in messages if wrong in m or PASSWORD in m]


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates(
    sasl_gateways: dict[str, BackgroundGateway],
    ca: CertificateAuthority,
    security: str,
    mechanism: str,
) -> None:
    config = confluent_config(sasl_gateways[security], security, mechanism, PASSWORD, ca)
    topic = new_topic(config, "sasl")
    values = [f"kp-{mechanism}-{i}".encode() for i in range(50)]
    assert kafka_python_round_trip(kafka_python_names(config), topic, values) == values


@pytest.mark.parametrize("security", SECURITY)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_wrong_password_is_refused(
    sasl_gateways: dict[str, BackgroundGateway],
    ca: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
    security: str,
    mechanism: str,
) -> None:
    # kafka-python keeps retrying a bootstrap that failed authentication until its bootstrap
    # timeout and then reports only the timeout; the cause is in its log.
    caplog.set_level(logging.WARNING, logger="kafka")
    gateway = sasl_gateways[security]
    config = kafka_python_names(confluent_config(gateway, security, mechanism, "nope", ca))
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
    sock.sendall(codec.encode_request_frame(body, correlation_id, "raw"))


def read_frame(sock: socket.socket) -> bytes | None:
    """One frame without its size, or None when the gateway closed the connection."""
    try:
        return raw_socket.read_frame(sock)[4:]
    except ConnectionError:
        return None


def connect(gateway: BackgroundGateway) -> socket.socket:
    return raw_socket.connect(gateway, timeout_s=15)


METADATA = metadata_v12.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)
"""A request only an authenticated connection may send."""


def plain_over_handshake_v0(sock: socket.socket, password: str) -> bytes | None:
    """SaslHandshake v0 for PLAIN, then the bare token it calls for (no SaslAuthenticate
    header); the gateway's answer to the token, or None when it closed instead."""
    send_request(sock, handshake_v0.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert read_frame(sock) is not None
    token = f"\x00{USER}\x00{password}".encode()
    sock.sendall(struct.pack(">i", len(token)) + token)
    return read_frame(sock)


def test_a_request_before_authentication_is_answered_by_a_close(
    sasl_gateways: dict[str, BackgroundGateway],
) -> None:
    with connect(sasl_gateways["SASL_PLAINTEXT"]) as sock:
        send_request(sock, METADATA, 7)
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
        # PLAIN's empty server reply, length-prefixed
        assert plain_over_handshake_v0(sock, PASSWORD) == b""
        # Authenticated: a real request now goes through to the broker.
        send_request(sock, METADATA, 2)
        frame = read_frame(sock)
        assert frame is not None
        assert struct.unpack(">i", frame[:4])[0] == 2

    with connect(sasl_gateways["SASL_PLAINTEXT"]) as sock:
        assert plain_over_handshake_v0(sock, "wrong") is None
