"""A TLS upstream: haproxy (``bind … ssl crt …``, certificates made here) in front of tansu,
which advertises haproxy's address. Real clients produce and consume through the gateway; a
wrong CA or host name is a clear error, and nothing reaches the upstream in plaintext."""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from quotagate.fleet.topic_log import TopicLog
from quotagate.gateway.embedded import LOOPBACK
from quotagate.gateway.embedded.background import BackgroundGateway
from support.clients import (
    aiokafka_round_trip,
    confluent_round_trip,
    kafka_python_round_trip,
    kafkajs,
    new_topic,
    topic_log_round_trip,
)
from support.tls_proxy import TlsUpstream

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsUpstream]:
    with TlsUpstream(tmp_path_factory.mktemp("tls-upstream")) as tls:
        yield tls


@pytest.fixture(scope="module")
def tls_gateway(
    upstream: TlsUpstream, start_module_gateway: Callable[..., BackgroundGateway]
) -> BackgroundGateway:
    return start_module_gateway(upstream.bootstrap, upstream_security=upstream.security())


def create_topic(bootstrap: str) -> str:
    return new_topic({"bootstrap.servers": bootstrap}, "tls")


VALUES = [f"over-tls-{i}".encode() for i in range(50)]


def confluent(bootstrap: str, topic: str, wait_for: Any) -> list[bytes]:
    return confluent_round_trip({"bootstrap.servers": bootstrap}, topic, VALUES, wait_for)


CLIENTS: dict[str, Callable[[str, str, Any], list[bytes]]] = {
    "confluent-kafka": confluent,
    "kafka-python": lambda bootstrap, topic, _: kafka_python_round_trip(
        {"bootstrap_servers": bootstrap}, topic, VALUES
    ),
    "aiokafka": lambda bootstrap, topic, _: aiokafka_round_trip(
        {"bootstrap_servers": bootstrap}, topic, VALUES
    ),
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_clients_produce_and_consume_through_a_tls_upstream(
    tls_gateway: BackgroundGateway, wait_for: Any, client: str
) -> None:
    bootstrap = str(tls_gateway.bootstrap)
    topic = create_topic(bootstrap)
    assert sorted(CLIENTS[client](bootstrap, topic, wait_for)) == sorted(VALUES)


def _security_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING
        and "upstream_" in r.getMessage()
        and "TLS" in r.getMessage()
    ]


def test_an_unknown_ca_is_a_clear_error(
    upstream: TlsUpstream,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = start_gateway(
        upstream.bootstrap,
        upstream_security=upstream.security(upstream.other_ca.certificate),
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=200,
        # The producer's request is held while the gateway retries the upstream, and the
        # gateway's stop waits for it: 3 s (the producer gives up at 3 s) instead of 10 s.
        upstream_connect_timeout_ms=3_000,
    )
    producer = Producer({"bootstrap.servers": str(gateway.bootstrap), "message.timeout.ms": 3000})
    outcome: list[Any] = []
    producer.produce("never", value=b"x", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(10)
    assert outcome and outcome[0] is not None  # not delivered
    wait_for(lambda: len(_security_errors(caplog)) >= 2, 20, "TLS errors, one per attempt")
    for line in _security_errors(caplog):
        assert "certificate verify failed" in line and "ssl.ca.location" in line, line


def test_a_wrong_host_name_is_a_clear_error(
    upstream: TlsUpstream,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    # The certificate names localhost; the gateway reaches the same proxy as 127.0.0.1.
    start_gateway(upstream.proxy.address, upstream_security=upstream.security())
    wait_for(lambda: _security_errors(caplog), 20, "a TLS error")
    line = _security_errors(caplog)[0]
    assert "mismatch" in line and "ssl.endpoint.identification.algorithm" in line, line


def test_turning_host_name_checks_off_reaches_it_by_address(
    upstream: TlsUpstream, start_gateway: Callable[..., BackgroundGateway], wait_for: Any
) -> None:
    gateway = start_gateway(
        upstream.proxy.address,
        upstream_security=upstream.security(**{"ssl.endpoint.identification.algorithm": ""}),
    )
    bootstrap = str(gateway.bootstrap)
    assert sorted(confluent(bootstrap, create_topic(bootstrap), wait_for)) == sorted(VALUES)


def test_nothing_is_sent_in_plaintext(
    upstream: TlsUpstream,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    """A plaintext listener where the TLS one should be: it only ever sees TLS handshakes."""
    caplog.set_level(logging.INFO, logger="quotagate")
    listener = socket.create_server((LOOPBACK, 0))
    port = listener.getsockname()[1]
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(2)
            data = b""
            try:
                while chunk := connection.recv(65536):
                    data += chunk
                    if len(data) > 5:
                        break
            except TimeoutError:
                pass
            received.append(data)
            connection.close()  # no TLS answer: the handshake fails

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        start_gateway(f"localhost:{port}", upstream_security=upstream.security())
        wait_for(lambda: len(received) >= 2, 20, "two connection attempts")
        wait_for(lambda: any("TLS" in r.getMessage() for r in caplog.records), 20, "a TLS error")
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    for data in received:
        assert data[:1] == b"\x16", data[:16]  # a TLS handshake record, every time
        assert b"quotagate" not in data  # no Kafka request header (client id) in the clear


def test_the_fleet_topics_run_over_the_tls_upstream(upstream: TlsUpstream) -> None:
    """The store's and usage exchange's librdkafka clients get the same spec, translated."""
    topic = f"_quotagate.tls-{uuid.uuid4().hex[:8]}.config"
    config = upstream.security().librdkafka_config()
    seen = topic_log_round_trip(upstream.bootstrap, topic, config, b"k", b"over tls")
    assert seen == [(b"k", b"over tls")]


def test_kafkajs_through_a_tls_upstream(tls_gateway: BackgroundGateway) -> None:
    topic = f"tls-kafkajs-{uuid.uuid4().hex[:8]}"
    done = kafkajs("round-trip", str(tls_gateway.bootstrap), topic, "50", f"group-{topic}")
    assert done["exactlyOnce"] is True


@pytest.fixture(scope="module")
def mtls_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsUpstream]:
    with TlsUpstream(tmp_path_factory.mktemp("mtls-upstream"), mtls=True) as tls:
        yield tls


def test_an_upstream_demanding_a_client_certificate(
    mtls_upstream: TlsUpstream,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    """ssl.certificate.location / ssl.key.location: the gateway's own certificate."""
    leaf = mtls_upstream.ca.issue("quotagate-gateway")
    with_certificate = mtls_upstream.security(
        **{"ssl.certificate.location": str(leaf.certificate), "ssl.key.location": str(leaf.key)}
    )
    gateway = start_gateway(mtls_upstream.bootstrap, upstream_security=with_certificate)
    bootstrap = str(gateway.bootstrap)
    assert sorted(confluent(bootstrap, create_topic(bootstrap), wait_for)) == sorted(VALUES)
    topic = f"_quotagate.mtls-{uuid.uuid4().hex[:8]}"
    log = TopicLog(
        mtls_upstream.bootstrap,
        topic,
        topic_config={},
        client_config=with_certificate.librdkafka_config(),
    )
    log.start_in_thread(lambda key, value: None)
    log.append_and_wait(b"k", b"with a client certificate")
    log.close_in_thread()
    caplog.set_level(logging.INFO, logger="quotagate")
    start_gateway(mtls_upstream.bootstrap, upstream_security=mtls_upstream.security())
    wait_for(lambda: _security_errors(caplog), 20, "a TLS error without a certificate")
    line = _security_errors(caplog)[0]
    assert "CERTIFICATE_REQUIRED" in line and "ssl.certificate.location" in line, line
