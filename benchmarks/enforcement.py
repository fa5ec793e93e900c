"""Quota enforcement cost and accuracy: two ``quotagate serve`` processes, same run.

    python benchmarks/enforcement.py [--messages 50000] [--rounds 3] [--seconds 30]

One tansu broker, two gateways in front of it (each its own process, as in production):

* ``plain``: the quota stages, no quota configured;
* ``quotas``: produce, fetch and request quotas configured for every client (a default
  client-id entity) far above what the benchmark reaches, plus a controller-mutation quota.

Rounds alternate between the two so drift on a noisy machine hits both alike; the report is
the median produce and consume throughput (confluent-kafka, 1 KiB messages) and the ratio.
Then accuracy: a greedy producer and a consumer, each under its own quota on the ``quotas``
gateway, for ``--seconds`` after a warm-up; achieved ÷ configured, over the whole measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from passthrough import (
    MESSAGE_BYTES,
    PARTITIONS,
    _consume_throughput,
    _produce_throughput,
    every_client_quotas,
    start_gateway,
)
from quotagate.gateway.embedded import TansuBroker
from quotagate.store.quotas import Change, QuotaStore

TANSU_NODE_ID = 111
PRODUCE_QUOTA = 1_000_000.0
FETCH_QUOTA = 1_000_000.0
WINDOWS = 2  # quota.window.num for the accuracy runs (see docs/quotas.md on 11 windows)
WARM_UP_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0, help="accuracy measure")
    args = parser.parse_args()
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        store = workdir / "quotas.db"
        _configure(store)
        plain, plain_process = _start(broker.bootstrap, workdir / "plain", None)
        quotas, quotas_process = _start(broker.bootstrap, workdir / "quotas", store)
        try:
            throughput = {"plain": ([], []), "quotas": ([], [])}
            for round_number in range(args.rounds):
                for name, bootstrap in (("plain", plain), ("quotas", quotas)):
                    produce, consume = _round(bootstrap, args.messages)
                    throughput[name][0].append(produce)
                    throughput[name][1].append(consume)
                    print(f"round {round_number + 1} {name}: done", file=sys.stderr)
            produce_accuracy = _produce_accuracy(quotas, args.seconds)
            consume_accuracy = _consume_accuracy(quotas, args.seconds)
        finally:
            for process in (plain_process, quotas_process):
                process.terminate()
                process.wait(30)
    _report(throughput, produce_accuracy, consume_accuracy, args)


def _configure(store_path: Path) -> None:
    store = QuotaStore.open(store_path)
    store.alter_client_quotas(
        [
            *every_client_quotas(),
            Change({"client-id": "accuracy-producer"}, "producer_byte_rate", PRODUCE_QUOTA),
            Change({"client-id": "accuracy-consumer"}, "consumer_byte_rate", FETCH_QUOTA),
        ],
        "benchmark",
        "benchmarks/enforcement.py",
    )
    store.close()


def _start(upstream: str, workdir: Path, store: Path | None) -> tuple[str, subprocess.Popen[bytes]]:
    workdir.mkdir()
    store_path = store or workdir / "empty.db"
    extra = f"""
[store]
path = "{store_path}"
[quotas]
"quota.window.num" = {WINDOWS}
"""
    return start_gateway(upstream, workdir, extra)


def _topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    return topic


def _round(bootstrap: str, messages: int) -> tuple[float, float]:
    topic = _topic(bootstrap)
    produce_s = _produce_throughput(bootstrap, topic, messages)
    consume_s = _consume_throughput(bootstrap, topic, messages)
    return messages * MESSAGE_BYTES / produce_s / 1e6, messages * MESSAGE_BYTES / consume_s / 1e6


def _produce_accuracy(bootstrap: str, seconds: float) -> float:
    topic = _topic(bootstrap, 1)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "accuracy-producer",
            "linger.ms": 5,
            "batch.size": 16384,
            "queue.buffering.max.messages": 64,
        }
    )
    delivered: list[tuple[float, int]] = []
    lock = threading.Lock()

    def done(error: object, message: object) -> None:
        if error is None:
            with lock:
                delivered.append((time.monotonic(), MESSAGE_BYTES * 4))

    value = os.urandom(MESSAGE_BYTES * 4)
    start = time.monotonic()
    while time.monotonic() < start + WARM_UP_S + seconds:
        try:
            producer.produce(topic, value, on_delivery=done)
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
    producer.flush(60)
    measured = sum(n for t, n in delivered if start + WARM_UP_S <= t < start + WARM_UP_S + seconds)
    return measured / seconds / PRODUCE_QUOTA


def _consume_accuracy(bootstrap: str, seconds: float) -> float:
    topic = _topic(bootstrap, 1)
    value = os.urandom(MESSAGE_BYTES * 4)
    total = int(FETCH_QUOTA * (WARM_UP_S + seconds + 5) / len(value))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384})
    for _ in range(total):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "accuracy-consumer",
            "group.id": f"accuracy-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 32768,
            "message.max.bytes": 32768,
            "max.partition.fetch.bytes": 32768,
        }
    )
    consumer.subscribe([topic])
    points: list[tuple[float, int]] = []
    start: float | None = None
    deadline = time.monotonic() + WARM_UP_S + seconds + 60
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        now = time.monotonic()
        start = start or now
        points.append((now, len(message.value())))
        if now > start + WARM_UP_S + seconds:
            break
    consumer.close()
    assert start is not None, "nothing consumed"
    measured = sum(n for t, n in points if start + WARM_UP_S <= t < start + WARM_UP_S + seconds)
    return measured / seconds / FETCH_QUOTA


def _report(
    throughput: dict[str, tuple[list[float], list[float]]],
    produce_accuracy: float,
    consume_accuracy: float,
    args: argparse.Namespace,
) -> None:
    med = statistics.median
    plain, quotas = throughput["plain"], throughput["quotas"]
    print(
        f"confluent-kafka, {MESSAGE_BYTES} B messages, {args.messages} per round, "
        f"{args.rounds} rounds (medians), {PARTITIONS} partitions"
    )
    print("| metric | no quotas | quotas configured, not exceeded | ratio |")
    print("|---|---|---|---|")
    for name, index in (("produce MB/s", 0), ("consume MB/s", 1)):
        p, q = med(plain[index]), med(quotas[index])
        print(f"| {name} | {p:,.2f} | {q:,.2f} | {q / p:.1%} |")
    print()
    print(f"quota accuracy over {args.seconds:.0f} s after {WARM_UP_S:.0f} s warm-up, "
          f"quota.window.num = {WINDOWS}, 1 s windows:")  # fmt: skip
    print("| quota | configured | achieved ÷ configured |")
    print("|---|---|---|")
    print(f"| producer_byte_rate | {PRODUCE_QUOTA:,.0f} B/s | {produce_accuracy:.3f} |")
    print(f"| consumer_byte_rate | {FETCH_QUOTA:,.0f} B/s | {consume_accuracy:.3f} |")


if __name__ == "__main__":
    main()
