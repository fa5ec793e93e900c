"""Greedy real clients under byte-rate quotas: achieved rate within ±5 % over 20 s.

Three clients run at once through one gateway, each under its own quota: two producers
(confluent-kafka, which ignores ``throttle_time_ms`` and is slowed only by the muted socket,
and kafka-python, which also pauses itself) under ``producer_byte_rate``, and a consumer of a
filled topic under ``consumer_byte_rate``. The quota windows are 2 × 1 s: with Kafka's
default 11 × 1 s a greedy client's rate over any 20 s oscillates by tens of percent around
the quota (a burst of ten windows' worth is let through each time old samples expire; see
docs/quotas.md), which is Kafka's behaviour too, so a 20 s accuracy test needs short windows.
The replay of the run's usage events reproduces every throttle the gateway decided.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from quotagate.pipeline.replay.core import replay_frame
from quotagate.protocol import api_keys
from quotagate.store.quotas import Change
from support import bounds

pytestmark = pytest.mark.integration

QUOTA = 300_000  # bytes per second, per producing client
FETCH_QUOTA = 500_000
WARM_UP_S = 4.0
# Whole spans of the windows: a throttled client can settle into taking a sample's worth every
# other window (a fetch quota more readily, its refused bytes being taken back), which a
# measure of whole spans reads as its mean whatever second it starts on.
MEASURE_S = 20.0
# Longer for the consumer, which shares two cores with both producers for their 20 s and then
# has them to itself: a consumer that waits out each throttle loses each round trip it makes
# on a loaded machine (20 s read 0.84 of its quota in front of tansu, 30 s 0.93).
FETCH_MEASURE_S = 30.0
FETCH_BYTES = 16384  # the consumer's fetch.max.bytes: one response
VALUE = b"v" * 4000
OUTSTANDING = 64  # records a producer holds ready beyond what the quota lets through
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def _create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def _usage_rows(path: Path) -> list[dict[str, Any]]:
    table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    return list(table.to_pylist())


def _rate_in(points: list[tuple[float, int]], start: float, seconds: float) -> float:
    return sum(n for t, n in points if start <= t < start + seconds) / seconds


class _Run:
    def __init__(self) -> None:
        self.delivered: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def ok(self, size: int) -> None:
        with self.lock:
            self.delivered.append((time.time(), size))

    def failed(self, error: object) -> None:
        with self.lock:
            self.errors.append(str(error))


def _confluent(bootstrap: str, topic: str, run: _Run, stop_at: float) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "greedy-confluent",
            "linger.ms": 5,
            "batch.size": 16384,
            "max.in.flight": 5,
            "request.timeout.ms": 30000,
            # Greedy, but with a bounded local queue so the run ends when told to.
            "queue.buffering.max.messages": OUTSTANDING,
        }
    )

    def delivered(error: Any, message: Any) -> None:
        run.failed(error) if error is not None else run.ok(len(message.value()))

    while time.time() < stop_at:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0


def _kafka_python(bootstrap: str, topic: str, run: _Run, stop_at: float) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="greedy-kafka-python",
        linger_ms=5,
        batch_size=16384,
        max_in_flight_requests_per_connection=5,
        request_timeout_ms=30000,
    )
    # kafka-python 3 has no buffer limit: bound the records outstanding ourselves.
    outstanding = threading.Semaphore(OUTSTANDING)

    def done(_meta: Any) -> None:
        outstanding.release()
        run.ok(len(VALUE))

    def failed(error: Any) -> None:
        outstanding.release()
        run.failed(error)

    while time.time() < stop_at:
        if not outstanding.acquire(timeout=0.1):
            continue
        future = producer.send(topic, VALUE)
        future.add_callback(done)
        future.add_errback(failed)
    producer.flush(60)
    producer.close(10)


def _filled_topic(bootstrap: str) -> tuple[str, int]:
    """A topic holding more numbered records than the slow consumer may read in its run."""
    topic = f"fetch-rate-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    total = int(FETCH_QUOTA * (WARM_UP_S + FETCH_MEASURE_S + 2) / len(VALUE))
    # Small batches: tansu answers a fetch with whole batches up to about the fetch size, and
    # the fetch quota is only accurate when one response is small against quota x window.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 8192})
    for i in range(total):
        producer.produce(topic, VALUE[:-8] + f"{i:08d}".encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    return topic, total


class _Consumed:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.points: list[tuple[float, int]] = []


def _slow_consumer(bootstrap: str, topic: str, total: int, consumed: _Consumed) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "slow-consumer",
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "fetch.max.bytes": FETCH_BYTES,
            "message.max.bytes": FETCH_BYTES,
            "max.partition.fetch.bytes": FETCH_BYTES,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    deadline = time.time() + 120
    while len(consumed.seen) < total and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        consumed.seen.append(int(message.value()[-8:]))
        consumed.points.append((time.time(), len(message.value())))
    consumer.close()


def test_greedy_producers_and_a_slow_consumer_get_their_quotas(
    quota_upstream: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    """Three clients at once through one gateway, each under its own quota: the two greedy
    producers for 20 s, the consumer reading a filled topic for 30 s."""
    usage = tmp_path / "usage"
    gateway = start_quota_gateway(quota_upstream, quotas=WINDOWS, usage={"path": str(usage)})
    fetch_topic, total = _filled_topic(gateway.bootstrap)
    gateway.runtime.store_sync.alter_client_quotas(
        [
            Change({"client-id": "greedy-confluent"}, "producer_byte_rate", float(QUOTA)),
            Change({"client-id": "greedy-kafka-python"}, "producer_byte_rate", float(QUOTA)),
            Change({"client-id": "slow-consumer"}, "consumer_byte_rate", float(FETCH_QUOTA)),
        ],
        "test",
        "test",
    )
    topic = f"rate-{uuid.uuid4().hex[:8]}"
    _create_topic(gateway.bootstrap, topic)
    start = time.time()
    stop_at = start + WARM_UP_S + MEASURE_S + 1
    runs = {"confluent": _Run(), "kafka-python": _Run()}
    consumed = _Consumed()
    threads = [
        threading.Thread(
            target=_confluent, args=(gateway.bootstrap, topic, runs["confluent"], stop_at)
        ),
        threading.Thread(
            target=_kafka_python, args=(gateway.bootstrap, topic, runs["kafka-python"], stop_at)
        ),
        threading.Thread(
            target=_slow_consumer, args=(gateway.bootstrap, fetch_topic, total, consumed)
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    gateway.stop()
    rows = _usage_rows(usage)
    _assert_producers_held(rows, runs, start + WARM_UP_S)
    _assert_consumer_held(rows, consumed, total)
    _assert_replay_reproduces(rows)


def _assert_producers_held(
    rows: list[dict[str, Any]], runs: dict[str, _Run], measured_from: float
) -> None:
    for name, client_id in (
        ("confluent", "greedy-confluent"),
        ("kafka-python", "greedy-kafka-python"),
    ):
        run = runs[name]
        assert run.errors == [], f"{name}: delivery failures {run.errors[:3]}"
        wire = [
            (r["ts_ms"] / 1000, r["request_bytes"])
            for r in rows
            if r["client_id"] == client_id and r["api_key"] == api_keys.PRODUCE
        ]
        wire_rate = _rate_in(wire, measured_from, MEASURE_S)
        payload_rate = _rate_in(run.delivered, measured_from, MEASURE_S)
        assert 0.95 * QUOTA <= wire_rate <= 1.05 * QUOTA, (name, wire_rate / QUOTA)
        # Record and request overheads are ~1.5 % of the wire bytes at 4 kB records.
        assert 0.93 * QUOTA <= payload_rate <= 1.05 * QUOTA, (name, payload_rate / QUOTA)
        throttled = [r for r in rows if r["client_id"] == client_id and r["throttle_ms"] > 0]
        assert throttled and {r["throttle_cause"] for r in throttled} == {"produce"}


def _assert_consumer_held(rows: list[dict[str, Any]], consumed: _Consumed, total: int) -> None:
    assert consumed.points, "the consumer got nothing"
    assert sorted(consumed.seen) == list(range(total)), "every message exactly once"
    start = consumed.points[0][0]
    assert consumed.points[-1][0] - start >= WARM_UP_S + FETCH_MEASURE_S
    # Measured as the quota counts it: the bytes of the fetch responses the consumer was not
    # throttled on (a throttled fetch is answered empty and un-recorded, as Kafka does).
    wire = [
        (r["ts_ms"] / 1000, r["response_bytes"])
        for r in rows
        if r["client_id"] == "slow-consumer"
        and r["api_key"] == api_keys.FETCH
        and r["throttle_ms"] == 0
    ]
    rate = _rate_in(wire, start + WARM_UP_S, FETCH_MEASURE_S)
    ceiling = bounds.ceiling(
        FETCH_MEASURE_S, WINDOWS, quota=FETCH_QUOTA, in_flight_bytes=FETCH_BYTES
    )
    # The ceiling is Kafka's arithmetic. The floor only shows the consumer was not over-throttled: a
    # consumer that waits out each throttle and then asks again, sharing two cores with two
    # greedy producers and the upstream, loses time it cannot make up (clean-clone runs: 0.93
    # of the quota in front of tansu; payload alone 0.9248 and 0.8885 in front of Kafka).
    # Throttling twice over would halve it.
    assert 0.85 * FETCH_QUOTA <= rate <= ceiling * FETCH_QUOTA, (rate / FETCH_QUOTA, ceiling)


def _assert_replay_reproduces(rows: list[dict[str, Any]]) -> None:
    """The pipeline's replay of the run's events reproduces every throttle decision."""
    quota_text = (
        '[[quota]]\n"client-id" = "greedy-confluent"\nproducer_byte_rate = 300000\n'
        '[[quota]]\n"client-id" = "greedy-kafka-python"\nproducer_byte_rate = 300000\n'
        '[[quota]]\n"client-id" = "slow-consumer"\nconsumer_byte_rate = 500000\n'
        '[gateway]\n"quota.window.num" = 2\n'
    )
    replayed = replay_frame(pd.DataFrame(rows), quota_text, closed_loop=False)
    differ = replayed[replayed["predicted_throttle_ms"] != replayed["throttle_ms"]]
    shown = ["ts_ms", "client_id", "api_key", "request_bytes", "throttle_ms"]
    assert differ.empty, (
        f"{len(differ)} of {len(replayed)} decisions differ:\n"
        f"{differ[[*shown, 'predicted_throttle_ms']].head(10).to_string()}"
    )
