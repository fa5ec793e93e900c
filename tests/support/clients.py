"""Real Kafka clients driven the same way by many tests: a fresh topic, a round trip (produce
then read back) with confluent-kafka, kafka-python, aiokafka, KafkaJS or the fleet's topic log,
and the authentication error a refused client reports.

Each helper takes the client's own configuration (security included) and returns what came
back; the assertions stay in the tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from quotagate.fleet.topic_log import TopicLog
from quotagate.store.quotas import Change

KAFKAJS = Path(__file__).parents[1] / "clients" / "kafkajs"

WaitFor = Callable[..., Any]
"""The ``wait_for`` fixture (tests/conftest.py)."""


def scram_config(bootstrap: str, user: str, password: str) -> dict[str, Any]:
    """A client's configuration for SASL/SCRAM-SHA-256 without TLS."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def new_topic(config: dict[str, Any], prefix: str) -> str:
    """A fresh one-partition topic, created with confluent-kafka's admin client on ``config``."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)  # held: a collected client cancels its futures
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    return topic


KAFKA_PYTHON_NAMES = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
}


def kafka_python_names(config: dict[str, Any]) -> dict[str, Any]:
    """A librdkafka config under kafka-python's names (aiokafka's too, but for TLS: it takes
    an ``ssl_context``); a key it has no name for here is an error."""
    return {KAFKA_PYTHON_NAMES[key]: value for key, value in config.items()}


def confluent_round_trip(
    config: dict[str, Any],
    topic: str,
    values: Sequence[bytes],
    wait_for: WaitFor,
    *,
    skip_errors: bool = False,
) -> list[bytes]:
    """Produce ``values`` (acks=all), then read partition 0 from the start until as many came
    back. A consumer error fails the test, or with ``skip_errors`` is passed over."""
    producer = Producer({**config, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}"})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    received: list[bytes] = []

    def drained() -> bool:
        for message in consumer.consume(100, 1.0):
            if skip_errors and message.error() is not None:
                continue
            assert message.error() is None, message.error()
            received.append(message.value())
        return len(received) >= len(values)

    wait_for(drained, 30, "every message back")
    consumer.close()
    return received


def kafka_python_round_trip(
    config: dict[str, Any], topic: str, values: Sequence[bytes]
) -> list[bytes]:
    """:func:`confluent_round_trip` with kafka-python (``config``: its keyword arguments)."""
    producer = KafkaProducer(**config, acks="all")
    for future in [producer.send(topic, value) for value in values]:
        future.get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**config, consumer_timeout_ms=10_000)
    consumer.assign([KpTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    received: list[bytes] = []
    for record in consumer:
        received.append(record.value)
        if len(received) == len(values):
            break
    consumer.close()
    return received


def aiokafka_round_trip(config: dict[str, Any], topic: str, values: Sequence[bytes]) -> list[bytes]:
    """:func:`confluent_round_trip` with aiokafka (``config``: its keyword arguments)."""

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config, acks="all")
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**config)
        await consumer.start()
        received: list[bytes] = []
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            while len(received) < len(values):
                batches = await consumer.getmany(timeout_ms=1000)
                received += [r.value for rs in batches.values() for r in rs if r.value]
        finally:
            await consumer.stop()
        return received

    return asyncio.run(asyncio.wait_for(run(), 60))


def kcat(*args: str, stdin: str | None = None, timeout: float = 60) -> str:
    """Debian's ``kcat ARGS…`` (librdkafka 2.0.2); what it printed. It must succeed."""
    found = shutil.which("kcat")
    assert found, "Debian's kcat is not installed: run `make test` or `apt-get install -y kcat`"
    done = subprocess.run(
        [found, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def kafkajs(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``node matrix.js ARGS…`` (tests/clients/kafkajs); the JSON it prints."""
    node = shutil.which("node")
    assert node, "Node.js is not installed: `make tools`"
    assert (KAFKAJS / "node_modules" / "kafkajs").is_dir(), (
        "KafkaJS is not installed: run `make test` (npm ci in tests/clients/kafkajs)"
    )
    done = subprocess.run(
        [node, str(KAFKAJS / "matrix.js"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def topic_log_round_trip(
    bootstrap: str, topic: str, client_config: dict[str, Any], key: bytes, value: bytes
) -> list[tuple[bytes | None, bytes | None]]:
    """One record appended through the fleet's :class:`TopicLog` (as the store and the usage
    exchange write), then the whole topic read back by a second one."""
    writer = TopicLog(bootstrap, topic, topic_config={}, client_config=client_config)
    writer.start_in_thread(lambda key, value: None)
    try:
        writer.append_and_wait(key, value)
    finally:
        writer.close_in_thread()
    seen: list[tuple[bytes | None, bytes | None]] = []
    reader = TopicLog(bootstrap, topic, topic_config={}, client_config=client_config)
    reader.start_in_thread(lambda key, value: seen.append((key, value)))
    reader.close_in_thread()
    return seen


def authentication_error(config: dict[str, Any], wait_for: WaitFor, timeout_s: float = 30) -> str:
    """What librdkafka reports when a producer on ``config`` is refused authentication (the
    first ``_AUTHENTICATION`` error); fails the test when none comes in ``timeout_s``."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})

    def refusals() -> list[str]:
        return [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]

    def refused() -> bool:
        producer.poll(0.2)
        return bool(refusals())

    try:
        wait_for(
            refused, timeout_s, "an authentication error", lambda: str([e.str() for e in errors])
        )
    finally:
        producer.flush(0)
    return refusals()[0]


def generous_quotas_of_every_kind() -> list[Change]:
    """A quota of every kind on every client id, far above what a test reaches: every quota
    stage then reads every request (the client matrices)."""
    return [
        Change({"client-id": None}, "producer_byte_rate", 50e6),
        Change({"client-id": None}, "consumer_byte_rate", 50e6),
        Change({"client-id": None}, "controller_mutation_rate", 1000.0),
        Change({"client-id": None}, "request_percentage", 1000.0),
    ]
