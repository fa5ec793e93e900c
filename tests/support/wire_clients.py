"""librdkafka clients that keep their own account of every request they send.

Each runs in a process of its own with ``debug=protocol``, which librdkafka writes to stderr:
one "Sent …Request" line per request on every connection, the bootstrap connections and the
client's close included (its statistics forget bootstrap connections, and a ``logger`` misses
what is logged while it closes). ``run(...)`` starts one and returns what it did.

    python -m support.wire_clients produce BOOTSTRAP TOPIC CLIENT_ID PARTITIONS RECORDS SIZE
    python -m support.wire_clients consume BOOTSTRAP TOPIC CLIENT_ID PARTITIONS RECORDS
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

_SENT = re.compile(r": Sent (\w+?)Request \(v\d+")


@dataclass
class Account:
    sent: Counter[str]
    """Requests sent, by librdkafka's name of the API ("ApiVersion", "Produce", …)."""
    value_bytes: int
    """Record values produced or read."""


def run(role: str, *args: object) -> Account:
    tests = Path(__file__).parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "support.wire_clients", role, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    sent = Counter(match.group(1) for match in _SENT.finditer(done.stderr))
    return Account(sent, json.loads(done.stdout)["value_bytes"])


def _produce(
    bootstrap: str, topic: str, client_id: str, partitions: int, records: int, size: int
) -> int:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": "all",
            "linger.ms": 5,
            "debug": "protocol",
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
                producer.produce(topic, value, partition=n % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60) or failures:
        raise SystemExit(f"not every record was delivered: {failures[:3]}")
    return records * size


def _consume(bootstrap: str, topic: str, client_id: str, partitions: int, records: int) -> int:
    """Read the topic from the start (assigned: the group is never joined)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": client_id,  # librdkafka wants one; assign() never joins it
            "enable.auto.commit": False,
            # One fetch takes a partition whole: no batch cut short at a limit and fetched
            # again, so the bytes fetched are the bytes read.
            "fetch.max.bytes": 50_000_000,
            "max.partition.fetch.bytes": 50_000_000,
            "receive.message.max.bytes": 60_000_000,
            "debug": "protocol",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    read = value_bytes = 0
    deadline = time.monotonic() + 60
    while read < records and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        read += 1
        value_bytes += len(message.value())
    consumer.close()
    if read != records:
        raise SystemExit(f"read {read} records of {records}")
    return value_bytes


def main(argv: list[str]) -> None:
    role, bootstrap, topic, client_id, *numbers = argv
    counts = [int(n) for n in numbers]
    if role == "produce":
        value_bytes = _produce(bootstrap, topic, client_id, *counts)
    else:
        value_bytes = _consume(bootstrap, topic, client_id, *counts)
    print(json.dumps({"value_bytes": value_bytes}))


if __name__ == "__main__":
    main(sys.argv[1:])
