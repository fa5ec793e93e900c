"""confluent-kafka, kafka-python and aiokafka through the gateway to a real tansu broker."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic as KpNewTopic

from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.embedded import TansuBroker

pytestmark = pytest.mark.integration

MESSAGES = 10_000
PARTITIONS = 3
SESSION_TIMEOUT_MS = 6000


def _values() -> set[bytes]:
    return {f"message-{i}".encode() for i in range(MESSAGES)}


def _assert_exactly_once(received: list[bytes]) -> None:
    assert len(received) == MESSAGES, f"{len(received)} messages received, {MESSAGES} produced"
    assert set(received) == _values()


def _gateway_ports(gateway: BackgroundGateway) -> set[int]:
    listener = next(iter(gateway.gateway.listeners.values()))
    return set(listener._node_ports.values())


def test_confluent_kafka(gateway: BackgroundGateway, tansu: TansuBroker, wait_for: Any) -> None:
    bootstrap = str(gateway.bootstrap)
    topic = f"ck-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CkNewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)

    metadata = admin.list_topics(timeout=30)
    addresses = {(b.host, b.port) for b in metadata.brokers.values()}
    assert addresses == {("127.0.0.1", port) for port in _gateway_ports(gateway)}
    assert tansu.port not in {port for _, port in addresses}

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    delivered: list[bytes] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err else delivered.append(msg.value()))

    for value in sorted(_values()):
        producer.produce(topic, value=value, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors
    _assert_exactly_once(delivered)

    def consume(consumer: Consumer) -> list[bytes]:
        received: list[bytes] = []

        def drained() -> bool:
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                received.append(message.value())
            return len(received) >= MESSAGES

        wait_for(drained, 90, "all messages")
        return received

    group = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"group-{topic}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        }
    )
    group.subscribe([topic])
    try:
        _assert_exactly_once(consume(group))
    finally:
        group.close()

    assigned = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    assigned.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    try:
        _assert_exactly_once(consume(assigned))
    finally:
        assigned.close()

    for future in admin.delete_topics([topic]).values():
        future.result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "topic deleted")


def test_kafka_python(gateway: BackgroundGateway, tansu: TansuBroker, wait_for: Any) -> None:
    bootstrap = str(gateway.bootstrap)
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([KpNewTopic(topic, PARTITIONS, 1)])
        nodes = admin.describe_cluster()["brokers"]
        assert {(n["host"], n["port"]) for n in nodes} == {
            ("127.0.0.1", port) for port in _gateway_ports(gateway)
        }

        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        futures = [producer.send(topic, value=value) for value in sorted(_values())]
        producer.flush(60)
        for future in futures:
            future.get(timeout=60)
        producer.close()

        def consume(consumer: KafkaConsumer) -> list[bytes]:
            received: list[bytes] = []

            def drained() -> bool:
                for records in consumer.poll(timeout_ms=1000).values():
                    received.extend(r.value for r in records)
                return len(received) >= MESSAGES

            wait_for(drained, 90, "all messages")
            return received

        group = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"group-{topic}",
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
        )
        try:
            _assert_exactly_once(consume(group))
            brokers = group._client.cluster.brokers()
            assert {b.port for b in brokers} <= _gateway_ports(gateway)
        finally:
            group.close()

        assigned = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        assigned.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        assigned.seek_to_beginning()
        try:
            _assert_exactly_once(consume(assigned))
        finally:
            assigned.close()

        admin.delete_topics([topic])
        wait_for(lambda: topic not in admin.list_topics(), 30, "topic deleted")
    finally:
        admin.close()


def test_aiokafka(gateway: BackgroundGateway, tansu: TansuBroker) -> None:
    asyncio.run(asyncio.wait_for(_aiokafka_round_trip(gateway), 180))


async def _aiokafka_round_trip(gateway: BackgroundGateway) -> None:
    bootstrap = str(gateway.bootstrap)
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([AioNewTopic(topic, PARTITIONS, 1)])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            sends = [await producer.send(topic, value=value) for value in sorted(_values())]
            await asyncio.gather(*sends)
            brokers = producer.client.cluster.brokers()
            assert {b.port for b in brokers} <= _gateway_ports(gateway)
            assert brokers
        finally:
            await producer.stop()

        async def consume(consumer: AIOKafkaConsumer) -> list[bytes]:
            received: list[bytes] = []
            while len(received) < MESSAGES:
                batches = await consumer.getmany(timeout_ms=1000, max_records=2000)
                for records in batches.values():
                    received.extend(r.value for r in records if r.value is not None)
            return received

        group = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"group-{topic}",
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
        )
        await group.start()
        try:
            _assert_exactly_once(await consume(group))
        finally:
            await group.stop()

        assigned = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await assigned.start()
        try:
            assigned.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await assigned.seek_to_beginning()
            _assert_exactly_once(await consume(assigned))
        finally:
            await assigned.stop()

        await admin.delete_topics([topic])
        deadline = asyncio.get_running_loop().time() + 30
        while topic in await admin.list_topics():
            assert asyncio.get_running_loop().time() < deadline, "topic not deleted"
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def _kcat() -> str:
    path = shutil.which("kcat")
    assert path, "Debian's kcat is not installed: run `make test` or `apt-get install -y kcat`"
    return path


def test_kcat_from_debian(gateway: BackgroundGateway, tansu: TansuBroker) -> None:
    """kcat 1.7.1 on librdkafka 2.0.2, which mis-skips tagged fields: it connects because
    the gateway leaves out tagged fields holding their defaults, as Kafka does."""
    kcat, bootstrap = _kcat(), str(gateway.bootstrap)
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CkNewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    listing = subprocess.run(
        [kcat, "-b", bootstrap, "-L", "-t", topic, "-m", "30"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    assert f"at 127.0.0.1:{tansu.port}" not in listing.stdout  # only gateway addresses
    lines = "\n".join(f"line-{i}" for i in range(1000)) + "\n"
    produced = subprocess.run(
        [kcat, "-b", bootstrap, "-P", "-t", topic, "-X", "acks=all"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == sorted(lines.split())
