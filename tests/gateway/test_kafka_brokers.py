"""Many brokers, for real: the gateway in front of the session's three-node Apache Kafka
cluster. One node is killed and restarted here, so this module runs after every other test
that uses the cluster (``kills_brokers``, tests/conftest.py).

* Partitions are led by all three brokers, and every response that names a broker
  (Metadata, FindCoordinator, DescribeCluster, every version the gateway offers) names one of
  the gateway's three broker ports, never a Kafka listener.
* One broker is killed with SIGKILL and restarted while idempotent producers (acks=all) and
  a consumer group run through the gateway under a ``producer_byte_rate`` on the producers'
  client id: they follow the new leaders through the gateway, no acknowledged record is lost
  or written twice, the group goes on consuming and the quota still holds afterwards.
* A reassignment made with Kafka's own ``ReassignPartitionsCommand`` through the gateway moves
  a partition's leader, and a producer and a consumer follow it.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jars
import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    Producer,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.static.primitive import i8

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.channel import build_request
from quotagate.protocol import api_keys, api_support, codec
from quotagate.store.quotas import Change
from support import bounds
from support.gateways import gateway_config, quota_gateway
from support.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.kills_brokers]

CLIENT_ID = "failover-producer"
QUOTA = 150_000.0  # bytes per second for the producers' client id, both of them together
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
VALUE = b"v" * 2000
OUTSTANDING = 32  # records each producer keeps queued beyond what the quota lets through
MEASURE_S = 8.0
PRODUCERS = 2
# Second by second the producers swung from 0.1 to 2.2 x the quota in a clean-clone run, and
# a 5 s measure after the restart read 1.109 x: the ceiling of a measure this short is Kafka's
# arithmetic (support/bounds.py), all the producers queue in flight at the end.
CEILING = bounds.ceiling(
    MEASURE_S, WINDOWS, quota=QUOTA, in_flight_bytes=PRODUCERS * OUTSTANDING * len(VALUE)
)

WaitFor = Callable[..., Any]


@dataclass
class Brokers:
    cluster: KafkaCluster
    gateway: BackgroundGateway
    runtime: QuotaRuntime
    gateway_ports: dict[int, int]

    @property
    def bootstrap(self) -> str:
        return str(self.gateway.bootstrap)

    @property
    def upstream_ports(self) -> set[int]:
        return {port for node in self.cluster.nodes.values() for port in node.ports.values()}


@pytest.fixture(scope="module")
def brokers(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    config = gateway_config(
        kafka.bootstrap(),
        node_ids=tuple(kafka.nodes),
        store_path=str(tmp_path_factory.mktemp("brokers") / "quotagate.db"),
        extra={"quotas": WINDOWS},
    )
    with quota_gateway(config) as live:
        yield Brokers(kafka, live.background, live.runtime, live.broker_ports(kafka.nodes))


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Replication factor and min.insync.replicas are the cluster's defaults: 3 and 2."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions)]).values():
        future.result(30)


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition → leader node id, as the metadata (through ``bootstrap``) says."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


# -- raw requests: every version the gateway offers --------------------------------------------


class _Raw:
    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._correlation = 0

    def request(self, body: Any) -> Any:
        self._correlation += 1
        self._sock.sendall(codec.encode_request_frame(body, self._correlation, "raw-addresses"))
        (size,) = struct.unpack(">i", self._read(4))
        frame = struct.pack(">i", size) + self._read(size)
        return codec.decode_response(frame, int(body.__api_key__), int(body.__version__))

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(n)
            if not chunk:
                raise ConnectionError("the gateway closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._sock.close()


def _addresses(api_key: int, response: Any) -> list[tuple[int, str, int]]:
    if api_key == api_keys.METADATA:
        return [(int(b.node_id), b.host, int(b.port)) for b in response.brokers]
    if api_key == api_keys.DESCRIBE_CLUSTER:
        return [(int(b.broker_id), b.host, int(b.port)) for b in response.brokers]
    if hasattr(response, "coordinators"):
        return [(int(c.node_id), c.host, int(c.port)) for c in response.coordinators]
    return [(int(response.node_id), response.host, int(response.port))]


def test_partitions_are_led_by_every_broker_and_only_gateway_ports_are_named(
    brokers: Brokers, wait_for: WaitFor
) -> None:
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    group = f"spread-group-{uuid.uuid4().hex[:8]}"
    _create_topic(brokers.bootstrap, topic, 6)
    assert set(_leaders(brokers.bootstrap, topic).values()) == {1, 2, 3}

    # What a client library sees: brokers, leaders, a group's coordinator, the cluster.
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap})
    metadata = admin.list_topics(topic, timeout=10)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        n: ("127.0.0.1", port) for n, port in brokers.gateway_ports.items()
    }
    # A group that has read a record and committed it; its coordinator, as described.
    producer = Producer({"bootstrap.servers": brokers.bootstrap})
    producer.produce(topic, b"one", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": brokers.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    try:
        message = wait_for(
            lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m,
            120,
            f"{group} reading a record",
        )
        consumer.commit(message, asynchronous=False)
        description = admin.describe_consumer_groups([group])[group].result(30)
    finally:
        consumer.close()
    coordinator = description.coordinator
    assert (coordinator.host, coordinator.port) == (
        "127.0.0.1",
        brokers.gateway_ports[coordinator.id],
    )
    cluster = admin.describe_cluster().result(30)
    assert {(n.id, n.port) for n in cluster.nodes} == set(brokers.gateway_ports.items())

    # Every version the gateway offers, asked on the wire of every gateway port.
    keys = (api_keys.METADATA, api_keys.FIND_COORDINATOR, api_keys.DESCRIBE_CLUSTER)
    raw = _Raw(brokers.gateway.bootstrap.port)
    try:
        offered = {
            r.api_key: range(r.min_version, r.max_version + 1)
            for r in api_support.advertised_ranges(
                raw.request(build_request(api_keys.API_VERSIONS, 0))
            )
        }
    finally:
        raw.close()
    seen: dict[tuple[int, int], list[tuple[int, str, int]]] = {}
    for port in (brokers.gateway.bootstrap.port, *brokers.gateway_ports.values()):
        raw = _Raw(port)
        try:
            for api_key in keys:
                for version in offered[api_key]:
                    body = build_request(
                        api_key,
                        version,
                        topics=() if version == 0 else None,
                        allow_auto_topic_creation=False,
                        include_cluster_authorized_operations=False,
                        include_topic_authorized_operations=False,
                        key=group,
                        key_type=i8(0),
                        coordinator_keys=(group,),
                        include_fenced_brokers=False,
                        endpoint_type=i8(1),
                    )
                    seen[(api_key, version)] = _addresses(api_key, raw.request(body))
        finally:
            raw.close()
    assert len(seen) == sum(len(offered[k]) for k in keys)
    named = {address for addresses in seen.values() for address in addresses}
    assert named, "no response named a broker"
    assert {(host, port) for _, host, port in named} <= {
        ("127.0.0.1", port) for port in brokers.gateway_ports.values()
    }
    assert all(brokers.gateway_ports[node] == port for node, _, port in named)
    assert not {port for _, _, port in named} & brokers.upstream_ports


# -- clients that keep a ledger -------------------------------------------------------------


@dataclass
class Ledger:
    """What producers had acknowledged and what a consumer group read, with the times."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[bytes, tuple[float, int, int]] = field(default_factory=dict)
    """key → (time acknowledged, partition, offset)"""
    failed: list[str] = field(default_factory=list)
    read: list[tuple[float, bytes, int, int]] = field(default_factory=list)
    """(time read, key, partition, offset), redeliveries included"""
    consumer_errors: list[str] = field(default_factory=list)

    def acked_after(self, moment: float, partitions: set[int] | None = None) -> dict[int, float]:
        """Partition → the first acknowledgement after ``moment``."""
        first: dict[int, float] = {}
        with self.lock:
            for at, partition, _ in self.acked.values():
                if at > moment and (partitions is None or partition in partitions):
                    first[partition] = min(first.get(partition, at), at)
        return first

    def read_after(self, moment: float) -> int:
        """Records read that had been acknowledged after ``moment``."""
        with self.lock:
            return sum(
                1 for _, key, _, _ in self.read if key in self.acked and self.acked[key][0] > moment
            )

    def acked_rate(self, start: float, seconds: float) -> float:
        with self.lock:
            count = sum(1 for at, _, _ in self.acked.values() if start <= at < start + seconds)
        return count * len(VALUE) / seconds

    def per_second(self, start: float) -> list[float]:
        """Acknowledged payload bytes in each second from ``start``, ÷ the quota."""
        seconds: Counter[int] = Counter()
        with self.lock:
            for at, _, _ in self.acked.values():
                if at >= start:
                    seconds[int(at - start)] += len(VALUE)
        return [round(seconds[n] / QUOTA, 2) for n in range(max(seconds, default=-1) + 1)]

    def missing(self) -> int:
        with self.lock:
            read = {key for _, key, _, _ in self.read}
            return len(self.acked.keys() - read)

    def duplicated(self) -> int:
        """Acknowledged records found at more than one offset of the log."""
        with self.lock:
            places: dict[bytes, set[tuple[int, int]]] = {}
            for _, key, partition, offset in self.read:
                places.setdefault(key, set()).add((partition, offset))
        return sum(1 for where in places.values() if len(where) > 1)

    def misplaced(self) -> list[tuple[int, int, int, int]]:
        """(told partition, told offset, read partition, read offset) of each record read at
        another place than the one its producer was told. A batch retried after a failover
        that the new leader already holds may be answered DUPLICATE_SEQUENCE_NUMBER without
        its offset (Kafka keeps the offsets of the last five batches per producer only), which
        librdkafka reports as delivered at offset -1: :meth:`unplaced` counts those."""
        with self.lock:
            return [
                (*self.acked[key][1:], partition, offset)
                for _, key, partition, offset in self.read
                if key in self.acked
                and self.acked[key][2] >= 0
                and self.acked[key][1:] != (partition, offset)
            ]

    def unplaced(self) -> int:
        """Records acknowledged without an offset (see :meth:`misplaced`)."""
        with self.lock:
            return sum(1 for _, _, offset in self.acked.values() if offset < 0)

    def redelivered(self) -> int:
        with self.lock:
            return len(self.read) - len({(p, o) for _, _, p, o in self.read})


def _produce(
    bootstrap: str, topic: str, name: str, client_id: str, ledger: Ledger, stop: threading.Event
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": OUTSTANDING,
            "message.timeout.ms": 120_000,
        }
    )

    def delivered(error: Any, message: Any) -> None:
        with ledger.lock:
            if error is not None:
                ledger.failed.append(f"{message.key()!r}: {error}")
            else:
                ledger.acked[message.key()] = (
                    time.time(),
                    message.partition(),
                    message.offset(),
                )

    sequence = 0
    while not stop.is_set():
        try:
            producer.produce(topic, VALUE, key=f"{name}:{sequence}".encode(), on_delivery=delivered)
            sequence += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(120)
    if left:
        with ledger.lock:
            ledger.failed.append(f"{name}: {left} records never acknowledged or failed")


def _consume(bootstrap: str, topic: str, group: str, ledger: Ledger, stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"{group}-consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                # Brokers going away are reported here and retried by librdkafka itself.
                if message.error().code() != KafkaError._PARTITION_EOF:
                    with ledger.lock:
                        ledger.consumer_errors.append(str(message.error()))
                continue
            with ledger.lock:
                ledger.read.append(
                    (time.time(), message.key(), message.partition(), message.offset())
                )
    finally:
        consumer.close()


class Clients:
    """Producer and consumer threads over one ledger, stopped producers first."""

    def __init__(self) -> None:
        self.ledger = Ledger()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._producers: list[threading.Thread] = []
        self._consumers: list[threading.Thread] = []

    def produce(self, bootstrap: str, topic: str, name: str, client_id: str) -> None:
        args = (bootstrap, topic, name, client_id, self.ledger, self._stop_producing)
        self._start(self._producers, _produce, args, name)

    def consume(self, bootstrap: str, topic: str, group: str) -> None:
        args = (bootstrap, topic, group, self.ledger, self._stop_consuming)
        self._start(self._consumers, _consume, args, group)

    @staticmethod
    def _start(
        threads: list[threading.Thread], target: Callable[..., None], args: Any, name: str
    ) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        threads.append(thread)

    def stop_producing(self) -> None:
        self._stop_producing.set()
        for thread in self._producers:
            thread.join(180)

    def stop(self) -> None:
        self.stop_producing()
        self._stop_consuming.set()
        for thread in self._consumers:
            thread.join(60)

    def await_everything_read(self, timeout_s: float = 60.0) -> None:
        """Until the group has read every acknowledged record, or the deadline."""
        deadline = time.monotonic() + timeout_s
        while self.ledger.missing() and time.monotonic() < deadline:
            time.sleep(0.1)


def test_a_broker_killed_and_restarted_under_idempotent_producers_and_a_group(
    brokers: Brokers, wait_for: WaitFor, tmp_path: Path, test_output: Path
) -> None:
    brokers.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": CLIENT_ID}, "producer_byte_rate", QUOTA)], "test", "test"
    )
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    _create_topic(brokers.bootstrap, topic, 6)
    clients = Clients()
    ledger = clients.ledger
    try:
        clients.consume(brokers.bootstrap, topic, f"failover-group-{uuid.uuid4().hex[:8]}")
        started = time.time()
        for name in [f"p{i + 1}" for i in range(PRODUCERS)]:
            clients.produce(brokers.bootstrap, topic, name, CLIENT_ID)
        # Measured from a second after the first acknowledgement: a new cluster's producer
        # ids can take a few seconds (COORDINATOR_LOAD_IN_PROGRESS).
        first = min(wait_for(lambda: ledger.acked_after(started), 60, "acknowledgements").values())
        before = (first + 1.0, MEASURE_S)
        wait_for(lambda: ledger.acked_after(sum(before)), 60, "acknowledgements before the kill")
        wait_for(lambda: ledger.read_after(started), 60, "the group reading")

        leaders = _leaders(brokers.bootstrap, topic)
        victim = max({1, 2, 3}, key=lambda node: list(leaders.values()).count(node))
        moved = {partition for partition, leader in leaders.items() if leader == victim}
        brokers.cluster.kill(victim)
        killed = time.time()
        admin = AdminClient({"bootstrap.servers": brokers.bootstrap})

        def victim_leads_none() -> bool:
            metadata = admin.list_topics(topic, timeout=10).topics[topic].partitions
            return all(p.leader not in (victim, -1) for p in metadata.values())

        wait_for(victim_leads_none, 90, f"new leaders in place of node {victim}")
        elected = time.time()
        followed = wait_for(
            lambda: (first := ledger.acked_after(killed, moved)).keys() == moved and first,
            90,
            f"acknowledgements on partitions {sorted(moved)} after node {victim} was killed",
        )
        new_leaders = _leaders(brokers.bootstrap, topic)
        wait_for(lambda: ledger.read_after(max(followed.values())), 60, "the group reading on")

        brokers.cluster.restart(victim)
        restarted = time.time()

        # The restarted node leads its partitions again (Kafka's own tool, through the
        # gateway): the clients must reach it through its gateway port once more.
        def victim_in_sync() -> bool:
            metadata = admin.list_topics(topic, timeout=10).topics[topic].partitions
            return all(victim in metadata[p].isrs for p in moved)

        wait_for(victim_in_sync, 90, f"node {victim} back in sync")
        _elect_preferred(brokers.bootstrap, topic, sorted(moved), tmp_path)
        wait_for(
            lambda: _leaders(brokers.bootstrap, topic) == leaders,
            60,
            f"node {victim} leading {sorted(moved)} again",
        )
        returned = time.time()
        back = wait_for(
            lambda: (first := ledger.acked_after(returned, moved)).keys() == moved and first,
            60,
            f"acknowledgements from node {victim} again",
        )
        after = (returned + 1.0, MEASURE_S)
        wait_for(lambda: ledger.acked_after(sum(after)), 60, "acknowledgements after restart")
        wait_for(lambda: ledger.read_after(sum(after)), 60, "the group reading after restart")
        clients.stop_producing()
        clients.await_everything_read()
    finally:
        clients.stop()

    figures = {
        "victim": victim,
        "partitions_moved": sorted(moved),
        "new_leaders": {p: new_leaders[p] for p in sorted(moved)},
        "leaders_elected_s": round(elected - killed, 2),
        "follow_s": {p: round(at - killed, 2) for p, at in sorted(followed.items())},
        "acknowledged": len(ledger.acked),
        "lost": ledger.missing(),
        "duplicated": ledger.duplicated(),
        "misplaced": ledger.misplaced(),
        "acknowledged_without_offset": ledger.unplaced(),
        "redelivered_to_the_group": ledger.redelivered(),
        "delivery_failures": len(ledger.failed),
        "back_s": {p: round(at - returned, 2) for p, at in sorted(back.items())},
        "restart_s": round(restarted - killed, 1),
        "rate_before_kill": round(ledger.acked_rate(*before) / QUOTA, 3),
        "rate_after_restart": round(ledger.acked_rate(*after) / QUOTA, 3),
        "rate_each_second": ledger.per_second(first),
        "killed_at_s": round(killed - first, 1),
        "restarted_at_s": round(restarted - first, 1),
    }
    (test_output / "kafka-failover.json").write_text(json.dumps(figures, indent=2) + "\n")
    assert victim not in {new_leaders[p] for p in moved}
    assert ledger.failed == []
    assert (figures["lost"], figures["duplicated"], figures["misplaced"]) == (0, 0, []), figures
    # Greedy producers held to the quota before the kill and after the restart (payload
    # bytes, a little below the frames the quota counts). How close to it they come (six
    # connections of one client id muted together; clients sharing the gateway's process on
    # a loaded machine) is issue 31's side-by-side measure, not this one: only the steady
    # window after the restart is held to a floor.
    assert figures["rate_before_kill"] <= CEILING, figures
    assert 0.5 <= figures["rate_after_restart"] <= CEILING, figures


def _kafka_tool(main: str, *args: str) -> str:
    """One of Kafka's own tools, run from its jars; its output."""
    command = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-XX:ActiveProcessorCount=1",
        "-cp",
        jars.classpath("kafka"),
        main,
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{main} failed: {done.stdout}{done.stderr}"
    return done.stdout


REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def _elect_preferred(bootstrap: str, topic: str, partitions: list[int], directory: Path) -> None:
    """Kafka's ``LeaderElectionCommand`` through the gateway: preferred leaders again."""
    plan = directory / "election.json"
    plan.write_text(
        json.dumps({"partitions": [{"topic": topic, "partition": p} for p in partitions]})
    )
    _kafka_tool(
        "org.apache.kafka.tools.LeaderElectionCommand",
        "--bootstrap-server",
        bootstrap,
        "--election-type",
        "PREFERRED",
        "--path-to-json-file",
        str(plan),
    )


def test_a_reassignment_made_with_kafkas_tool_through_the_gateway_moves_the_leader(
    brokers: Brokers, wait_for: WaitFor, tmp_path: Path, test_output: Path
) -> None:
    topic = f"moved-{uuid.uuid4().hex[:8]}"
    _create_topic(brokers.bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap})
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    leader, replicas = partition.leader, list(partition.replicas)
    # Without the leader among the new replicas the controller must elect another one.
    target = [node for node in replicas if node != leader]
    plan = tmp_path / "reassignment.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}
        )
    )
    clients = Clients()
    ledger = clients.ledger
    try:
        clients.consume(brokers.bootstrap, topic, f"moved-group-{uuid.uuid4().hex[:8]}")
        started = time.time()
        clients.produce(brokers.bootstrap, topic, "mover", "mover")
        wait_for(lambda: ledger.read_after(started), 60, "the group reading before the move")

        executed = _kafka_tool(
            REASSIGN,
            "--bootstrap-server",
            brokers.bootstrap,
            "--reassignment-json-file",
            str(plan),
            "--execute",
        )
        asked = time.time()
        assert "Successfully started partition reassignment" in executed, executed

        def verified() -> bool:
            out = _kafka_tool(
                REASSIGN,
                "--bootstrap-server",
                brokers.bootstrap,
                "--reassignment-json-file",
                str(plan),
                "--verify",
            )
            return f"Reassignment of partition {topic}-0 is completed" in out

        wait_for(verified, 90, f"the reassignment of {topic}-0 to {target}")
        completed = time.time()
        moved = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        followed = wait_for(
            lambda: ledger.acked_after(completed).get(0), 60, "acknowledgements after the move"
        )
        wait_for(lambda: ledger.read_after(completed), 60, "the group reading after the move")
        clients.stop_producing()
        clients.await_everything_read()
    finally:
        clients.stop()

    figures = {
        "leader_before": leader,
        "replicas_before": replicas,
        "leader_after": moved.leader,
        "replicas_after": list(moved.replicas),
        "reassignment_s": round(completed - asked, 2),
        "first_ack_after_completion_s": round(followed - completed, 2),
        "acknowledged": len(ledger.acked),
        "lost": ledger.missing(),
        "duplicated": ledger.duplicated(),
    }
    (test_output / "kafka-reassignment.json").write_text(json.dumps(figures, indent=2) + "\n")
    assert sorted(moved.replicas) == sorted(target)
    assert moved.leader in target and moved.leader != leader
    assert ledger.failed == []
    assert (ledger.missing(), ledger.duplicated(), ledger.misplaced()) == (0, 0, []), figures
