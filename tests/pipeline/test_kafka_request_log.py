"""The pipeline on Apache Kafka's own request log: the test cluster's ``request.log`` files,
exactly as Kafka 4.3.1's ``kafka.request.logger`` wrote them (the JSON form of KIP-673: Kafka 4
writes no text form), through ``quotagate pipeline ingest``.

Real clients (librdkafka) work straight at the cluster with client ids of their own and known
byte counts; each keeps its own count of the requests it sent (librdkafka's statistics). The
ingest must read every line Kafka wrote (none failed, none another logger's), count every
request each client made, by API, and give each producer's produce bytes and the consumer's
fetch bytes within 1 % of what the clients sent and read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.pipeline.apis import API_NAMES
from support.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.integration

PARTITIONS = 3
# client id → (records, value size): different sizes, so a mix-up would show.
PRODUCERS = {"reqlog-producer-a": (400, 5000), "reqlog-producer-b": (200, 20000)}
CONSUMER = "reqlog-consumer"
STATS_MS = 100


class Stats:
    """librdkafka's latest statistics, from its ``stats_cb``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Any] = {}
        self.emitted = 0

    def __call__(self, document: str) -> None:
        with self._lock:
            self._latest = json.loads(document)
            self.emitted += 1

    def latest(self) -> dict[str, Any]:
        with self._lock:
            return self._latest

    def requests(self) -> Counter[str]:
        """Requests sent, by librdkafka's name of the API, over every broker connection."""
        sent: Counter[str] = Counter()
        for broker in self.latest().get("brokers", {}).values():
            sent.update({name: count for name, count in broker.get("req", {}).items() if count})
        return sent

    def idle(self) -> bool:
        """Nothing queued or awaiting a response on any connection."""
        brokers = self.latest().get("brokers", {}).values()
        return bool(brokers) and all(
            b["outbuf_cnt"] == 0 and b["waitresp_cnt"] == 0 and b["waitresp_msg_cnt"] == 0
            for b in brokers
        )


def _settled(client: Any, stats: Stats, timeout_s: float = 30.0) -> Counter[str]:
    """The client's request counts once it has nothing in flight and two reports agree."""
    deadline = time.monotonic() + timeout_s
    previous: Counter[str] | None = None
    while time.monotonic() < deadline:
        seen = stats.emitted
        while stats.emitted == seen and time.monotonic() < deadline:
            client.poll(0.05)
        current = stats.requests()
        if stats.idle() and current == previous:
            return current
        previous = current
    raise AssertionError(f"the client never settled: {stats.latest().get('brokers')}")


def _produce(bootstrap: str, topic: str, client_id: str, records: int, size: int) -> Counter[str]:
    stats = Stats()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": "all",
            "linger.ms": 5,
            "statistics.interval.ms": STATS_MS,
            "stats_cb": stats,
        }
    )
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    value = b"x" * size
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=n % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []
    return _settled(producer, stats)


def _consume(bootstrap: str, topic: str, expected: int) -> tuple[Counter[str], int]:
    """Read the topic from the start (assigned, no group); the requests and the value bytes."""
    stats = Stats()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CONSUMER,
            "group.id": "unused",  # librdkafka wants one; assign() never joins it
            "enable.auto.commit": False,
            # One fetch takes a partition whole: no batch cut short at a limit and fetched
            # again, so the bytes fetched are the bytes read.
            "fetch.max.bytes": 50_000_000,
            "max.partition.fetch.bytes": 50_000_000,
            "receive.message.max.bytes": 60_000_000,
            "statistics.interval.ms": STATS_MS,
            "stats_cb": stats,
        }
    )
    partitions = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    read = value_bytes = 0
    deadline = time.monotonic() + 60
    while read < expected and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        read += 1
        value_bytes += len(message.value())
    assert read == expected
    consumer.pause(partitions)
    try:
        return _settled(consumer, stats), value_bytes
    finally:
        consumer.close()


def _complete_lines(source: Path, target: Path) -> None:
    """The log as Kafka wrote it, up to its last complete line (the broker writes on)."""
    data = source.read_bytes()
    target.write_bytes(data[: data.rfind(b"\n") + 1])


def _librdkafka_api(name: str) -> int:
    """librdkafka's name of an API ("ApiVersion", "FindCoordinator") → its key."""
    table = {key.replace("_", "").lower(): value for key, value in API_NAMES.items()}
    return table[{"apiversion": "apiversions"}.get(name.lower(), name.lower())]


def test_kafka_request_log_counts_every_request_and_byte_of_each_client(
    kafka: KafkaCluster, tmp_path: Path, test_output: Path
) -> None:
    bootstrap = kafka.bootstrap()
    topic = f"reqlog-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
        future.result(30)

    sent = {
        client_id: _produce(bootstrap, topic, client_id, records, size)
        for client_id, (records, size) in PRODUCERS.items()
    }
    total_records = sum(records for records, _ in PRODUCERS.values())
    sent[CONSUMER], read_bytes = _consume(bootstrap, topic, total_records)
    expected = {
        client_id: Counter({_librdkafka_api(name): n for name, n in requests.items()})
        for client_id, requests in sent.items()
    }

    # Kafka writes a request's line once its response is sent: wait for the last ones.
    logs = tmp_path / "logs"
    logs.mkdir()
    deadline = time.monotonic() + 30
    while True:
        lines = [
            line
            for node in kafka.nodes.values()
            for line in node.request_log.read_text().splitlines()
            if any(f'"clientId":"{client_id}"' in line for client_id in expected)
        ]
        if len(lines) >= sum(sum(c.values()) for c in expected.values()):
            break
        assert time.monotonic() < deadline, f"{len(lines)} lines of the clients' requests"
        time.sleep(0.1)
    for node in kafka.nodes.values():
        _complete_lines(node.request_log, logs / f"node-{node.node_id}.log")

    out = tmp_path / "events"
    done = subprocess.run(
        [sys.executable, "-m", "quotagate", "pipeline", "ingest", str(logs), str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "_ingest_report.json").read_text())

    events = ds.dataset(out, format="parquet", partitioning="hive").to_table().to_pylist()
    counted: dict[str, Counter[int]] = {client_id: Counter() for client_id in expected}
    produced: Counter[str] = Counter()
    fetched: Counter[str] = Counter()
    for event in events:
        client_id = event["client_id"]
        if client_id in counted:
            counted[client_id][event["api_key"]] += 1
            if event["api_key"] == API_NAMES["PRODUCE"]:
                produced[client_id] += event["request_bytes"]
            if event["api_key"] == API_NAMES["FETCH"]:
                fetched[client_id] += event["response_bytes"]

    figures = {
        "lines": report["lines"],
        "events": report["events"],
        "failed": report["failed"],
        "other": report["other"],
        "requests": {
            c: {"client": sum(expected[c].values()), "ingested": sum(counted[c].values())}
            for c in expected
        },
        "produce_bytes": {
            c: {"values": records * size, "ingested": produced[c]}
            for c, (records, size) in PRODUCERS.items()
        },
        "fetch_bytes": {CONSUMER: {"values": read_bytes, "ingested": fetched[CONSUMER]}},
    }
    (test_output / "kafka-request-log.json").write_text(json.dumps(figures, indent=2) + "\n")

    assert (report["failed"], report["other"]) == (0, 0), report
    assert report["events"] == report["lines"]
    assert counted == expected
    for client_id, (records, size) in PRODUCERS.items():
        assert produced[client_id] == pytest.approx(records * size, rel=0.01), figures
    assert fetched[CONSUMER] == pytest.approx(read_bytes, rel=0.01), figures
