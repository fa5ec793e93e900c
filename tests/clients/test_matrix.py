"""The client matrix: each client through a gateway with quotas configured, in front of each
upstream (a real tansu broker, the three-node Apache Kafka cluster). Each one creates a topic
with its admin API, produces to it, consumes it in a consumer group (every message exactly
once), is held to a produce quota under a client id of its own, and deletes the topic. The
README's "Clients" table lists what each one does.

* confluent-kafka (librdkafka) ignores ``throttle_time_ms``: only the muted socket holds it.
* kafka-python, aiokafka and KafkaJS honour ``throttle_time_ms`` too.
* kcat is Debian's package (1.7.1 on librdkafka 2.0.2, which mis-skips tagged fields: the
  gateway writes responses as Kafka's serializer does, defaults left out). kcat has no admin
  commands: its topic is created and deleted with confluent-kafka's admin client.
* KafkaJS is installed from npm by ``make test`` (``npm ci`` against the package-lock.json in
  tests/clients/kafkajs) and driven through ``matrix.js``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KpNewTopic

from quotagate.enforcement import QuotaRuntime
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.kio_nested import build, nested
from quotagate.store.quotas import Change
from support import bounds
from support.clients import generous_quotas_of_every_kind, kafkajs, kcat
from support.gateways import gateway_config, quota_gateway
from support.upstreams import Upstream

pytestmark = pytest.mark.integration

MESSAGES = 2000
PARTITIONS = 3
SESSION_TIMEOUT_MS = 6000
RECORD = b"v" * 10_000  # throttled records; small batches, so the mute holds every client


# -- the gateway: every quota kind applies to every client ---------------------------------

QUOTA = 100_000
"""producer_byte_rate of each client's throttled client id, bytes per second."""
THROTTLED_BYTES = 500_000
"""What each client produces under that quota: five seconds' worth."""
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
"""With Kafka's 11 x 1 s the first seconds of a greedy client run far over the quota
(docs/quotas.md), so a 5 s measure needs short windows."""
BATCH_BYTES = 20_000
"""The throttled producers' batch size: two records."""


@dataclasses.dataclass
class MatrixGateway:
    background: BackgroundGateway
    runtime: QuotaRuntime
    upstream: Upstream
    broker_ports: set[int]
    """The gateway's ports for the upstream's nodes: the only broker addresses clients may
    be told."""

    @property
    def bootstrap(self) -> str:
        return str(self.background.bootstrap)


def throttled_client_id(client: str) -> str:
    return f"matrix-throttled-{client}"


@pytest.fixture(scope="module")
def matrix_gateway(
    upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MatrixGateway]:
    store = tmp_path_factory.mktemp("matrix") / "quotagate.db"
    config = gateway_config(
        upstream,
        store_path=str(store),
        extra={"quotas": WINDOWS},
    )
    # Each client's throttled id gets a tight produce quota beside them.
    changes = generous_quotas_of_every_kind()
    changes += [
        Change({"client-id": throttled_client_id(c)}, "producer_byte_rate", float(QUOTA))
        for c in ("confluent-kafka", "kafka-python", "aiokafka", "kcat", "kafkajs")
    ]
    with quota_gateway(config, changes) as live:
        ports = set(live.broker_ports(upstream.node_ids).values())
        yield MatrixGateway(live.background, live.runtime, upstream, ports)


def gateway_addresses(gateway: MatrixGateway) -> set[tuple[str, int]]:
    return {("127.0.0.1", port) for port in gateway.broker_ports}


def _values() -> list[bytes]:
    return [f"message-{i}".encode() for i in range(MESSAGES)]


def _assert_exactly_once(received: list[bytes]) -> None:
    assert len(received) == MESSAGES, f"{len(received)} messages received, {MESSAGES} produced"
    assert set(received) == set(_values())


HELD_PARTITION = 0
"""Where each greedy producer writes. One partition is one connection: in front of Kafka three
partitions are led by three brokers, and a client sends to each at once, so the throttle still
owed on every connection when the last acknowledgement arrives goes unmeasured (1.39 x QUOTA seen
on librdkafka). What many connections of one client achieve is measured beside Kafka's own
enforcement (benchmarks/kafka_side_by_side.py)."""


def _assert_held(seconds: float) -> None:
    """A greedy producer of THROTTLED_BYTES to HELD_PARTITION under a QUOTA bytes/s produce
    quota achieves the quota: measured here at 0.99-1.01 x QUOTA for most runs of every client
    (5 s; unthrottled it takes a fraction of a second). Slower only when the machine is loaded.
    The ceiling is what Kafka's arithmetic allows a client measured from its first request,
    whose last batch's throttle falls after the last acknowledgement (a clean-clone run read
    kafka-python 1.205 x in 4.15 s)."""
    rate = THROTTLED_BYTES / seconds
    ceiling = bounds.ceiling(
        seconds, WINDOWS, quota=QUOTA, in_flight_bytes=BATCH_BYTES, from_first_request=True
    )
    assert 0.5 * QUOTA <= rate <= ceiling * QUOTA, (
        f"{rate:.0f} B/s in {seconds:.2f} s, quota {QUOTA}, ceiling {ceiling:.3f} x"
    )


def _topic(client: str) -> str:
    return f"matrix-{client}-{uuid.uuid4().hex[:6]}"


# -- confluent-kafka ------------------------------------------------------------------------


def _ck_create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CkNewTopic(topic, partitions, 1)]).values():
        future.result(30)
    return admin


def _ck_delete(admin: AdminClient, topic: str, wait_for: Callable[..., Any]) -> None:
    for future in admin.delete_topics([topic]).values():
        future.result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "topic deleted")


def _ck_throttled(bootstrap: str, topic: str) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": throttled_client_id("confluent-kafka"),
            "batch.size": BATCH_BYTES,
            "linger.ms": 0,
            "acks": 1,
        }
    )
    started = time.monotonic()
    for _ in range(THROTTLED_BYTES // len(RECORD)):
        producer.produce(topic, RECORD, partition=HELD_PARTITION)
        producer.poll(0)
    assert producer.flush(60) == 0
    return time.monotonic() - started


def test_confluent_kafka(matrix_gateway: MatrixGateway, wait_for: Callable[..., Any]) -> None:
    bootstrap, topic = matrix_gateway.bootstrap, _topic("ck")
    admin = _ck_create(bootstrap, topic)
    brokers = admin.list_topics(timeout=30).brokers.values()
    assert {(b.host, b.port) for b in brokers} == gateway_addresses(matrix_gateway)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    failed: list[Any] = []
    for value in _values():
        producer.produce(topic, value, on_delivery=lambda e, _m: failed.append(e) if e else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"group-{topic}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        }
    )
    consumer.subscribe([topic])
    received: list[bytes] = []

    def drained() -> bool:
        for message in consumer.consume(1000, 1.0):
            assert message.error() is None, message.error()
            received.append(message.value())
        return len(received) >= MESSAGES

    try:
        wait_for(drained, 60, "all messages")
    finally:
        consumer.close()
    _assert_exactly_once(received)
    _assert_held(_ck_throttled(bootstrap, topic))
    _ck_delete(admin, topic, wait_for)


# -- kafka-python ---------------------------------------------------------------------------


def test_kafka_python(matrix_gateway: MatrixGateway, wait_for: Callable[..., Any]) -> None:
    bootstrap, topic = matrix_gateway.bootstrap, _topic("kp")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([KpNewTopic(topic, PARTITIONS, 1)])
        nodes = {(n["host"], n["port"]) for n in admin.describe_cluster()["brokers"]}
        assert nodes == gateway_addresses(matrix_gateway)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        for future in [producer.send(topic, value=value) for value in _values()]:
            future.get(timeout=60)
        producer.close()
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"group-{topic}",
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
        )
        received: list[bytes] = []

        def drained() -> bool:
            for records in consumer.poll(timeout_ms=1000).values():
                received.extend(r.value for r in records)
            return len(received) >= MESSAGES

        try:
            wait_for(drained, 60, "all messages")
        finally:
            consumer.close()
        _assert_exactly_once(received)

        throttled = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=throttled_client_id("kafka-python"),
            acks=1,
            batch_size=BATCH_BYTES,
            linger_ms=0,
        )
        started = time.monotonic()
        futures = [
            throttled.send(topic, RECORD, partition=HELD_PARTITION)
            for _ in range(THROTTLED_BYTES // len(RECORD))
        ]
        throttled.flush(60)
        for future in futures:
            future.get(timeout=60)
        _assert_held(time.monotonic() - started)
        throttled.close()

        admin.delete_topics([topic])
        wait_for(lambda: topic not in admin.list_topics(), 30, "topic deleted")
    finally:
        admin.close()


# -- aiokafka -------------------------------------------------------------------------------


def test_aiokafka(matrix_gateway: MatrixGateway) -> None:
    asyncio.run(asyncio.wait_for(_aiokafka(matrix_gateway.bootstrap), 120))


async def _aiokafka(bootstrap: str) -> None:
    topic = _topic("aio")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([AioNewTopic(topic, PARTITIONS, 1)])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            await asyncio.gather(*[await producer.send(topic, value=v) for v in _values()])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"group-{topic}",
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
        )
        await consumer.start()
        received: list[bytes] = []
        try:
            while len(received) < MESSAGES:
                batches = await consumer.getmany(timeout_ms=1000, max_records=2000)
                for records in batches.values():
                    received.extend(r.value for r in records if r.value is not None)
        finally:
            await consumer.stop()
        _assert_exactly_once(received)

        throttled = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=throttled_client_id("aiokafka"),
            acks=1,
            max_batch_size=BATCH_BYTES,
            linger_ms=0,
        )
        await throttled.start()
        try:
            started = time.monotonic()
            sends = [
                await throttled.send(topic, RECORD, partition=HELD_PARTITION)
                for _ in range(THROTTLED_BYTES // len(RECORD))
            ]
            await asyncio.gather(*sends)
            _assert_held(time.monotonic() - started)
        finally:
            await throttled.stop()

        await admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in await admin.list_topics():
            assert time.monotonic() < deadline, "topic not deleted"
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


# -- kcat (Debian) --------------------------------------------------------------------------


def test_kcat_from_debian(matrix_gateway: MatrixGateway, wait_for: Callable[..., Any]) -> None:
    bootstrap, topic = matrix_gateway.bootstrap, _topic("kcat")
    admin = _ck_create(bootstrap, topic)
    listings: list[str] = []

    def listed() -> bool:
        # Kafka's brokers learn of a new topic from the metadata log a moment after it is
        # created: until then the one asked answers "Unknown topic or partition".
        listings.append(kcat("-b", bootstrap, "-L", "-t", topic, "-m", "30"))
        return f'topic "{topic}" with {PARTITIONS} partitions' in listings[-1]

    wait_for(listed, 30, "kcat lists the new topic")
    for address in matrix_gateway.upstream.bootstrap.split(","):
        assert f"at {address}" not in listings[-1]  # gateway addresses only
    lines = "\n".join(v.decode() for v in _values()) + "\n"
    kcat("-b", bootstrap, "-P", "-t", topic, "-X", "acks=all", stdin=lines)
    consumed = kcat(
        "-b",
        bootstrap,
        "-G",
        f"group-{topic}",
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        f"session.timeout.ms={SESSION_TIMEOUT_MS}",
        "-e",
        "-q",
        topic,
    )
    _assert_exactly_once([line.encode() for line in consumed.split()])
    records = "\n".join(RECORD.decode() for _ in range(THROTTLED_BYTES // len(RECORD))) + "\n"
    started = time.monotonic()
    kcat(
        "-b",
        bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        str(HELD_PARTITION),
        "-X",
        f"client.id={throttled_client_id('kcat')}",
        "-X",
        f"batch.size={BATCH_BYTES}",
        "-X",
        "linger.ms=0",
        stdin=records,
    )
    _assert_held(time.monotonic() - started)
    _ck_delete(admin, topic, wait_for)


# -- KafkaJS (npm) --------------------------------------------------------------------------


def testkafkajs(matrix_gateway: MatrixGateway) -> None:
    bootstrap, topic = matrix_gateway.bootstrap, _topic("kafkajs")
    round_trip = kafkajs("round-trip", bootstrap, topic, str(MESSAGES), f"group-{topic}")
    assert round_trip == {
        "created": True,
        "produced": MESSAGES,
        "consumed": MESSAGES,
        "exactlyOnce": True,
        "deleted": True,
    }
    held_topic = _topic("kafkajs-held")
    # One partition, as HELD_PARTITION for the others.
    admin = _ck_create(bootstrap, held_topic, partitions=1)
    held = kafkajs(
        "throttled", bootstrap, held_topic, throttled_client_id("kafkajs"), str(THROTTLED_BYTES)
    )
    assert held["bytes"] == THROTTLED_BYTES
    _assert_held(held["seconds"])
    for future in admin.delete_topics([held_topic]).values():
        future.result(30)


# -- what tansu itself cannot do ------------------------------------------------------------


def _exchange(host: str, port: int, body: Any, api_key: int, version: int) -> Any:
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(codec.encode_request_frame(body, 9, "old-consumer"))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = struct.pack(">i", size) + sock.recv(size, socket.MSG_WAITALL)
    return codec.decode_response(frame, api_key, version)


def _coordinator(host: str, port: int, group: str) -> tuple[str, int]:
    """Where ``group``'s coordinator is, as FindCoordinator v1 (what old consumers send) tells
    it, asked until the coordinator is loaded."""
    schema = api_table.request_schema(api_keys.FIND_COORDINATOR, 1)
    deadline = time.monotonic() + 30
    while True:
        found = _exchange(host, port, build(schema, key=group, key_type=0), 10, 1)
        if int(found.error_code) == 0:
            return found.host, int(found.port)
        assert time.monotonic() < deadline, f"no coordinator for {group}: {found}"
        time.sleep(0.2)


def _join_group(host: str, port: int, version: int, group: str) -> Any:
    schema = api_table.request_schema(api_keys.JOIN_GROUP, version)
    protocol = build(nested(schema, "JoinGroupRequestProtocol"), name="range", metadata=b"\0")
    body = build(
        schema,
        group_id=group,
        session_timeout=datetime.timedelta(milliseconds=SESSION_TIMEOUT_MS),
        rebalance_timeout=datetime.timedelta(milliseconds=SESSION_TIMEOUT_MS),
        member_id="",
        protocol_type="consumer",
        protocols=(protocol,),
    )
    return _exchange(host, port, body, api_keys.JOIN_GROUP, version)


@pytest.mark.parametrize("version", [1, 3])
def test_join_group_below_v4(matrix_gateway: MatrixGateway, version: int) -> None:
    """An old consumer (JoinGroup v0-3, no KIP-394 retry) joins through the gateway exactly
    as it would straight. tansu answers every version with MEMBER_ID_REQUIRED (79), which
    only v4+ clients know to retry, so such a client cannot join a group on tansu; Kafka
    makes it the group's leader at once."""
    gateway = matrix_gateway.background.bootstrap
    answers = []
    for host, port in ((gateway.host, gateway.port), _upstream_address(matrix_gateway)):
        group = f"old-group-{uuid.uuid4().hex[:6]}"
        deadline = time.monotonic() + 30
        answer = _join_group(*_coordinator(host, port, group), version, group)
        # What a client retries after finding the coordinator again, while it loads or moves.
        while int(answer.error_code) in COORDINATOR_MOVING and time.monotonic() < deadline:
            time.sleep(0.2)
            answer = _join_group(*_coordinator(host, port, group), version, group)
        # The member id the broker makes up is random: everything else must be the same.
        members = tuple(dataclasses.replace(m, member_id="") for m in answer.members)
        answers.append(dataclasses.replace(answer, member_id="", leader="", members=members))
    through, straight = answers
    assert through == straight
    if matrix_gateway.upstream.is_kafka:
        assert int(straight.error_code) == 0 and straight.generation_id == 1
    else:
        assert int(straight.error_code) == 79


COORDINATOR_MOVING = (14, 15, 16)  # load in progress, not available, not coordinator


def _upstream_address(gateway: MatrixGateway) -> tuple[str, int]:
    host, _, port = gateway.upstream.bootstrap.split(",")[0].rpartition(":")
    return host, int(port)
