"""Side by side with Kafka's own quota enforcement: the same workload in the same run.

    python benchmarks/kafka_side_by_side.py [--seconds 30] [--connections 1 5 20] [--windows 11]

A three-node Apache Kafka cluster (tests/support/kafka_cluster.py, quota windows set with
``--windows`` x 1 s on the brokers and on the gateway alike) and one ``quotagate serve`` in
front of it. Each workload runs twice, under a client id of its own each time:

* **Kafka**: straight at the brokers, the quota set in Kafka (AlterClientQuotas to Kafka);
* **quotagate**: through the gateway, the same quota set in quotagate (AlterClientQuotas to
  the gateway, which answers it itself) and none in Kafka.

Workloads, on a topic whose one partition broker 1 leads unless said otherwise:

* greedy confluent-kafka producers (librdkafka's default batching, ``linger.ms`` 5), N
  connections of one client id, under ``producer_byte_rate``;
* confluent-kafka consumers of one client id, N connections, each reading the topic from the
  start, under ``consumer_byte_rate``;
* KIP-599: the same CreateTopics burst under ``controller_mutation_rate`` (error codes and
  ``throttle_time_ms`` of each response);
* the known difference: one greedy producer on a topic with a partition led by each broker.

Rates are wire bytes (librdkafka's ``txbytes``/``rxbytes`` statistics, every request and
response as the client sent or got it) over the measure after a warm-up, as achieved ÷ quota.
Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from passthrough import start_gateway
from quotagate.client.quotas import ClientQuotaAlteration
from quotagate.client.sync import SyncAdminClient
from quotagate.protocol import api_keys, codec
from support.exchanges import create_topics_request
from support.kafka_cluster import KafkaCluster, kafka_cluster

QUOTA = 1_000_000.0
"""Byte-rate quota of every byte-rate row, bytes per second."""
WARM_UP_S = 5.0
VALUE = b"q" * 1024
MUTATION_RATE = 2.0
MUTATION_WINDOWS = 10


# -- measuring --------------------------------------------------------------------------------


class WireBytes:
    """A client's cumulative wire bytes, from librdkafka's statistics every 500 ms."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.samples: list[tuple[float, int]] = []
        self._lock = threading.Lock()

    def on_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        total = sum(b[self.key] for b in stats["brokers"].values())
        with self._lock:
            self.samples.append((time.time(), total))

    def between(self, start: float, end: float) -> float:
        """Bytes in ``[start, end]``, from the samples nearest inside it."""
        with self._lock:
            inside = [(t, n) for t, n in self.samples if start <= t <= end]
        if len(inside) < 2:
            return 0.0
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0) * (end - start)


def _rate(meters: list[WireBytes], start: float, seconds: float) -> float:
    return sum(m.between(start, start + seconds) for m in meters) / seconds


def greedy_producers(
    bootstrap: str, topic: str, client_id: str, connections: int, seconds: float
) -> float:
    """N producers of ``client_id`` as fast as they are let; bytes/s over the measure."""
    meters = [WireBytes("txbytes") for _ in range(connections)]
    start = time.time()
    stop_at = start + WARM_UP_S + seconds + 1

    def run(meter: WireBytes) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "statistics.interval.ms": 500,
                "stats_cb": meter.on_stats,
                # What is buffered waits for the quota anyway; a bound keeps memory flat.
                "queue.buffering.max.kbytes": 4096,
            }
        )
        while time.time() < stop_at:
            try:
                producer.produce(topic, VALUE)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.purge()
        producer.flush(5)

    _together([lambda m=m: run(m) for m in meters])
    return _rate(meters, start + WARM_UP_S, seconds)


def consumers(
    bootstrap: str, topic: str, client_id: str, connections: int, seconds: float
) -> float:
    """N consumers of ``client_id``, each reading ``topic``'s partition 0 from the start."""
    meters = [WireBytes("rxbytes") for _ in range(connections)]
    start = time.time()
    stop_at = start + WARM_UP_S + seconds + 1

    def run(meter: WireBytes) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "group.id": f"unused-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "statistics.interval.ms": 500,
                "stats_cb": meter.on_stats,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        while time.time() < stop_at:
            consumer.consume(1000, 0.2)
        consumer.close()

    _together([lambda m=m: run(m) for m in meters])
    return _rate(meters, start + WARM_UP_S, seconds)


def _together(runs: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=run) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# -- KIP-599 ----------------------------------------------------------------------------------


def _exchange(sock: socket.socket, body: Any, correlation: int, client_id: str) -> Any:
    sock.sendall(codec.encode_request_frame(body, correlation, client_id))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    frame = struct.pack(">i", size) + sock.recv(size, socket.MSG_WAITALL)
    return codec.decode_response(frame, api_keys.CREATE_TOPICS, 7)


def mutation_burst(address: str, client_id: str) -> list[tuple[list[int], int]]:
    """CreateTopics v7 bursts (20, 1, 1 partitions; then 1; then 3 after 1 s): per response,
    the topics' error codes and ``throttle_time_ms``."""
    host, _, port = address.rpartition(":")
    answers: list[tuple[list[int], int]] = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for correlation, (counts, pause) in enumerate((((20, 1, 1), 0), ((1,), 0), ((3,), 1.0))):
            time.sleep(pause)
            names = [(f"burst-{uuid.uuid4().hex[:8]}", n) for n in counts]
            response = _exchange(sock, create_topics_request(7, names), correlation, client_id)
            codes = [int(t.error_code) for t in response.topics]
            answers.append((codes, int(response.throttle_time.total_seconds() * 1000)))
    return answers


# -- the run ----------------------------------------------------------------------------------


class SideBySide:
    def __init__(self, cluster: KafkaCluster, gateway: str) -> None:
        self.cluster = cluster
        self.kafka = cluster.bootstrap()
        self.gateway = gateway

    def quota(self, bootstrap: str, client_id: str, key: str, value: float) -> None:
        with SyncAdminClient(bootstrap) as admin:
            admin.alter_client_quotas(
                [ClientQuotaAlteration.of({"client-id": client_id}, {key: value})]
            ).raise_on_error()
        time.sleep(1.0)  # Kafka applies a quota once its metadata log reaches each broker

    def topic(self, leaders: list[int]) -> str:
        name = f"side-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.kafka})
        new = NewTopic(name, len(leaders), replica_assignment=[[leader] for leader in leaders])
        for future in admin.create_topics([new]).values():
            future.result(30)
        return name

    def both(self, key: str, measure: Callable[[str, str], float]) -> tuple[float, float]:
        """``measure(bootstrap, client_id)`` straight at Kafka, then through quotagate."""
        results = []
        for side, bootstrap in (("kafka", self.kafka), ("quotagate", self.gateway)):
            client_id = f"{side}-{uuid.uuid4().hex[:6]}"
            self.quota(bootstrap, client_id, key, QUOTA)
            results.append(measure(bootstrap, client_id) / QUOTA)
        return results[0], results[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--windows", type=int, default=11, help="quota.window.num, both sides")
    parser.add_argument("--skip-consumers", action="store_true")
    args = parser.parse_args()
    windows = {
        "quota.window.num": str(args.windows),
        "quota.window.size.seconds": "1",
        "controller.quota.window.num": str(MUTATION_WINDOWS),
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        kafka_cluster(Path(tmp) / "kafka", windows, request_log=False) as c,
    ):
        extra = f"""
[quotas]
"quota.window.num" = {args.windows}
"quota.window.size.seconds" = 1
"controller.quota.window.num" = {MUTATION_WINDOWS}
"super.users" = ["User:ANONYMOUS"]
"""
        gateway, process = start_gateway(c.bootstrap(), Path(tmp), extra, node_ids=tuple(c.nodes))
        try:
            run = SideBySide(c, gateway)
            _report(run, args)
        finally:
            process.terminate()
            process.wait(30)


def _report(run: SideBySide, args: argparse.Namespace) -> None:
    rows: list[str] = []
    single = run.topic([1])
    for n in args.connections:
        kafka, gateway = run.both(
            "producer_byte_rate",
            lambda b, c, n=n: greedy_producers(b, single, c, n, args.seconds),
        )
        rows.append(f"| produce, librdkafka | {n} | {kafka:.3f} | {gateway:.3f} |")
        print(rows[-1], file=sys.stderr)
    if not args.skip_consumers:
        loaded = run.topic([1])
        _preload(run.kafka, loaded, int(QUOTA * (WARM_UP_S + args.seconds + 2) * 1.5))
        for n in args.connections:
            kafka, gateway = run.both(
                "consumer_byte_rate",
                lambda b, c, n=n: consumers(b, loaded, c, n, args.seconds),
            )
            rows.append(f"| consume, librdkafka | {n} | {kafka:.3f} | {gateway:.3f} |")
            print(rows[-1], file=sys.stderr)
    spread = run.topic([1, 2, 3])
    kafka, gateway = run.both(
        "producer_byte_rate", lambda b, c: greedy_producers(b, spread, c, 1, args.seconds)
    )
    rows.append(f"| produce, 3 partitions led by 3 brokers | 1 | {kafka:.3f} | {gateway:.3f} |")
    print(f"\nquota {QUOTA:.0f} B/s, {args.windows} x 1 s windows, {args.seconds:.0f} s measure")
    print("\n| workload | connections | Kafka achieved ÷ quota | quotagate achieved ÷ quota |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    _report_mutations(run)


def _report_mutations(run: SideBySide) -> None:
    print(
        f"\nKIP-599: controller_mutation_rate {MUTATION_RATE}/s, {MUTATION_WINDOWS} x 1 s windows"
    )
    print("\n| request | Kafka codes, throttle ms | quotagate codes, throttle ms |")
    print("|---|---|---|")
    answers = []
    for side, address in (("kafka", run.cluster.nodes[1].address()), ("quotagate", run.gateway)):
        client_id = f"{side}-mutations-{uuid.uuid4().hex[:6]}"
        run.quota(address, client_id, "controller_mutation_rate", MUTATION_RATE)
        answers.append(mutation_burst(address, client_id))
    labels = ("CreateTopics (20, 1, 1)", "CreateTopics (1), at once", "CreateTopics (3), 1 s on")
    for label, kafka, gateway in zip(labels, *answers, strict=True):
        print(f"| {label} | {kafka[0]}, {kafka[1]} | {gateway[0]}, {gateway[1]} |")


def _preload(bootstrap: str, topic: str, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for _ in range(size // len(VALUE) + 1):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


if __name__ == "__main__":
    main()
