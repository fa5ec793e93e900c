"""The pipeline on Apache Kafka's own request log: the test cluster's ``request.log`` files,
exactly as Kafka 4.3.1's ``kafka.request.logger`` wrote them (the JSON form of KIP-673: Kafka 4
writes no text form), through ``quotagate pipeline ingest``.

Real clients (librdkafka) work straight at the cluster with client ids of their own and known
byte counts; each keeps its own account of the requests it sent (librdkafka's protocol debug
lines). The ingest must read every line Kafka wrote (none failed, none another logger's),
count every request each client made, by API, and give each producer's produce bytes and
the consumer's fetch bytes within 1 % of what the clients sent and read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.pipeline.apis import API_NAMES
from quotagate.pipeline.ingest.reference import FORWARDED
from support import wire_clients
from support.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.integration

PARTITIONS = 3
# client id → (records, value size): different sizes, so a mix-up would show.
PRODUCERS = {"reqlog-producer-a": (400, 5000), "reqlog-producer-b": (200, 20000)}
CONSUMER = "reqlog-consumer"


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

    accounts = {
        client_id: wire_clients.run("produce", bootstrap, topic, client_id, PARTITIONS, *shape)
        for client_id, shape in PRODUCERS.items()
    }
    total_records = sum(records for records, _ in PRODUCERS.values())
    accounts[CONSUMER] = wire_clients.run(
        "consume", bootstrap, topic, CONSUMER, PARTITIONS, total_records
    )
    expected = {
        client_id: Counter({_librdkafka_api(name): n for name, n in account.sent.items()})
        for client_id, account in accounts.items()
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
    forwarded = sum(path.read_text().count('"isForwarded":true') for path in logs.iterdir())

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
        "fetch_bytes": {
            CONSUMER: {"values": accounts[CONSUMER].value_bytes, "ingested": fetched[CONSUMER]}
        },
    }
    (test_output / "kafka-request-log.json").write_text(json.dumps(figures, indent=2) + "\n")

    # Every line Kafka wrote is read: an event, or a request a broker forwarded to the
    # controller (the broker logged the client's request itself).
    assert report["failed"] == 0, report
    assert report["other"] == forwarded, report
    assert {s["reason"] for s in report["other_samples"]} <= {FORWARDED}
    assert report["events"] + forwarded == report["lines"]
    assert counted == expected
    for client_id, (records, size) in PRODUCERS.items():
        assert produced[client_id] == pytest.approx(records * size, rel=0.01), figures
    assert fetched[CONSUMER] == pytest.approx(accounts[CONSUMER].value_bytes, rel=0.01), figures
