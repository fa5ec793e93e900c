"""A TLS upstream: haproxy (``bind … ssl crt …``, certificates made here) in front of tansu,
which advertises haproxy's address. Real clients produce and consume through the gateway; a
wrong CA or host name is a clear error, and nothing reaches the upstream in plaintext."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from quotagate.fleet.topic_log import TopicLog
from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.embedded import LOOPBACK
from support.tls_proxy import TlsUpstream

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsUpstream]:
    tls = TlsUpstream(tmp_path_factory.mktemp("tls-upstream"))
    tls.tansu.start()
    try:
        with tls.proxy:
            yield tls
    finally:
        tls.tansu.stop()


@pytest.fixture(scope="module")
def tls_gateway(
    upstream: TlsUpstream, start_module_gateway: Callable[..., BackgroundGateway]
) -> BackgroundGateway:
    return start_module_gateway(upstream.bootstrap, upstream_security=upstream.security())


def create_topic(bootstrap: str) -> str:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    return topic


VALUES = [f"over-tls-{i}".encode() for i in range(50)]


def confluent_round_trip(bootstrap: str, topic: str, wait_for: Any) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in VALUES:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}"})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    received: list[bytes] = []

    def drained() -> bool:
        for message in consumer.consume(100, 1.0):
            assert message.error() is None, message.error()
            received.append(message.value())
        return len(received) >= len(VALUES)

    wait_for(drained, 30, "every message back")
    consumer.close()
    return received


def kafka_python_round_trip(bootstrap: str, topic: str, wait_for: Any) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for future in [producer.send(topic, value) for value in VALUES]:
        future.get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000)
    consumer.assign([KpTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    received = []
    for record in consumer:
        received.append(record.value)
        if len(received) == len(VALUES):
            break
    consumer.close()
    return received


def aiokafka_round_trip(bootstrap: str, topic: str, wait_for: Any) -> list[bytes]:
    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for value in VALUES:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        received: list[bytes] = []
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            while len(received) < len(VALUES):
                batches = await consumer.getmany(timeout_ms=1000)
                received += [r.value for records in batches.values() for r in records if r.value]
        finally:
            await consumer.stop()
        return received

    return asyncio.run(asyncio.wait_for(run(), 60))


CLIENTS: dict[str, Callable[[str, str, Any], list[bytes]]] = {
    "confluent-kafka": confluent_round_trip,
    "kafka-python": kafka_python_round_trip,
    "aiokafka": aiokafka_round_trip,
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
    assert sorted(confluent_round_trip(bootstrap, create_topic(bootstrap), wait_for)) == sorted(
        VALUES
    )


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
    writer = TopicLog(upstream.bootstrap, topic, topic_config={}, client_config=config)
    writer.start_in_thread(lambda key, value: None)
    try:
        writer.append_and_wait(b"k", b"over tls")
    finally:
        writer.close_in_thread()
    seen: list[tuple[bytes | None, bytes | None]] = []
    reader = TopicLog(upstream.bootstrap, topic, topic_config={}, client_config=config)
    reader.start_in_thread(lambda key, value: seen.append((key, value)))
    reader.close_in_thread()
    assert seen == [(b"k", b"over tls")]


def test_kafkajs_through_a_tls_upstream(tls_gateway: BackgroundGateway) -> None:
    kafkajs = Path(__file__).parents[1] / "clients" / "kafkajs"
    node = shutil.which("node")
    assert node, "Node.js is not installed: `make tools`"
    assert (kafkajs / "node_modules" / "kafkajs").is_dir(), "KafkaJS is not installed: `make test`"
    topic = f"tls-kafkajs-{uuid.uuid4().hex[:8]}"
    script = [node, str(kafkajs / "matrix.js"), "round-trip"]
    done = subprocess.run(
        [*script, str(tls_gateway.bootstrap), topic, "50", f"group-{topic}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["exactlyOnce"] is True


@pytest.fixture(scope="module")
def mtls_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsUpstream]:
    tls = TlsUpstream(tmp_path_factory.mktemp("mtls-upstream"), mtls=True)
    tls.tansu.start()
    try:
        with tls.proxy:
            yield tls
    finally:
        tls.tansu.stop()


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
    assert sorted(confluent_round_trip(bootstrap, create_topic(bootstrap), wait_for)) == sorted(
        VALUES
    )
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
