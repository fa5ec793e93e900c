"""Per-topic bytes-in thresholds: a hot topic is refused while a cool one flows on the same
producer, and confluent-kafka, kafka-python and aiokafka all retry the refusal error until the
threshold is lifted (through IncrementalAlterConfigs on the gateway), losing nothing."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaProducer

pytestmark = pytest.mark.integration

TOTAL = 20_000.0  # bytes per second, gateway-wide
HOT_THRESHOLD = 5_000.0
RECORDS = 10
VALUE = b"r" * 1000


def _alter(bootstrap: str, total: float | None, topic: str, threshold: float | None) -> None:
    """Set (or delete, with None) both thresholds through the gateway's Kafka API."""

    def entry(name: str, value: float | None) -> ConfigEntry:
        if value is None:
            return ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
        return ConfigEntry(name, str(value), incremental_operation=AlterConfigOpType.SET)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [
        ConfigResource(
            ResourceType.BROKER,
            "111",
            incremental_configs=[entry("total.bytes.in.per.sec.threshold", total)],
        ),
        ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[entry("bytes.in.per.sec.threshold", threshold)],
        ),
    ]
    # Lower the topic first when tightening, raise the total first when loosening (sum rule).
    ordered = resources if total is None or total > TOTAL else resources[::-1]
    for resource in ordered:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class _Outcomes:
    def __init__(self) -> None:
        self.ok: dict[str, int] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def done(self, topic: str, error: object | None) -> None:
        with self.lock:
            if error is None:
                self.ok[topic] = self.ok.get(topic, 0) + 1
            else:
                self.errors.append(str(error))

    def count(self, topic: str) -> int:
        with self.lock:
            return self.ok.get(topic, 0)


def _confluent(bootstrap: str, hot: str, cool: str, outcomes: _Outcomes) -> Callable[[], None]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": "t-confluent", "linger.ms": 0}
    )
    for _ in range(RECORDS):
        for topic in (hot, cool):
            producer.produce(topic, VALUE, on_delivery=lambda e, m: outcomes.done(m.topic(), e))
            producer.poll(0)
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            producer.poll(0.05)
        producer.flush(60)

    thread = threading.Thread(target=pump)
    thread.start()

    def finish() -> None:
        stop.set()
        thread.join(90)

    return finish


def _kafka_python(bootstrap: str, hot: str, cool: str, outcomes: _Outcomes) -> Callable[[], None]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="t-kafka-python", linger_ms=0)
    # Metadata first: once the connection is being throttled, send() would wait on it.
    for topic in (hot, cool):
        producer.partitions_for(topic)
    for _ in range(RECORDS):
        for topic in (hot, cool):
            future = producer.send(topic, VALUE)
            future.add_callback(lambda meta: outcomes.done(meta.topic, None))
            future.add_errback(lambda error: outcomes.done("", error))

    def finish() -> None:
        producer.flush(60)
        producer.close(10)

    return finish


def _aiokafka(bootstrap: str, hot: str, cool: str, outcomes: _Outcomes) -> Callable[[], None]:
    loop = asyncio.new_event_loop()
    producer: list[AIOKafkaProducer] = []

    async def start() -> list[asyncio.Future[Any]]:
        client = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="t-aiokafka", linger_ms=0)
        await client.start()
        producer.append(client)
        for topic in (hot, cool):
            await client.partitions_for(topic)
        futures = []
        for _ in range(RECORDS):
            for topic in (hot, cool):
                futures.append(await client.send(topic, VALUE))
        return futures

    futures = loop.run_until_complete(start())

    async def settle() -> None:
        for future in asyncio.as_completed(futures):
            try:
                meta = await future
            except Exception as error:
                outcomes.done("", error)
            else:
                outcomes.done(meta.topic, None)
        await producer[0].stop()

    task = loop.create_task(settle())
    thread = threading.Thread(target=loop.run_until_complete, args=(task,))
    thread.start()

    def finish() -> None:
        thread.join(90)
        loop.close()

    return finish


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_hot_topic_refused_cool_flows_and_retries_lose_nothing(
    client: str, quota_tansu: Any, start_quota_gateway: Any
) -> None:
    gateway = start_quota_gateway(
        quota_tansu.bootstrap,
        quotas={"super.users": ["User:ANONYMOUS"], "total.bytes.in.per.sec.threshold": TOTAL},
    )
    tag = uuid.uuid4().hex[:6]
    hot, cool = f"hot-{tag}", f"cool-{tag}"
    _alter(gateway.bootstrap, TOTAL, hot, HOT_THRESHOLD)
    # Heat: ~60 kB/s into the hot topic until the one-minute rates (first tick after 5 s)
    # put both the total and the topic over their thresholds.
    heater = Producer({"bootstrap.servers": gateway.bootstrap, "client.id": "heater"})
    runtime = gateway.runtime
    deadline = time.monotonic() + 30
    while runtime.topic_refusals == 0:
        assert time.monotonic() < deadline, "the hot topic was never refused"
        heater.produce(hot, b"h" * 6000)
        heater.poll(0.1)
    refusals_before = runtime.topic_refusals

    outcomes = _Outcomes()
    start = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}[client]
    finish = start(gateway.bootstrap, hot, cool, outcomes)
    _wait(lambda: outcomes.count(cool) == RECORDS, 30, "the cool topic to flow")
    _wait(lambda: runtime.topic_refusals > refusals_before + 1, 30, "refusals of the client")
    assert outcomes.count(hot) == 0, "hot records went through while the topic was refused"
    assert outcomes.errors == []

    _alter(gateway.bootstrap, 10_000_000.0, hot, None)
    _wait(lambda: outcomes.count(hot) == RECORDS, 60, "the refused records to be retried")
    finish()
    heater.flush(60)
    assert outcomes.errors == []
    assert outcomes.ok == {hot: RECORDS, cool: RECORDS}


def test_throttle_mode_admits_and_throttles(quota_upstream: Any, start_quota_gateway: Any) -> None:
    gateway = start_quota_gateway(
        quota_upstream,
        quotas={"total.bytes.in.per.sec.threshold": TOTAL, "topic.bytes.in.mode": "throttle"},
    )
    hot = f"hot-throttled-{uuid.uuid4().hex[:6]}"
    throttles: list[float] = []
    outcomes = _Outcomes()
    producer = Producer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "client.id": "throttled",
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    deadline = time.monotonic() + 30
    while gateway.runtime.topic_throttles == 0:
        assert time.monotonic() < deadline, "never throttled"
        producer.produce(hot, b"h" * 6000, on_delivery=lambda e, m: outcomes.done(m.topic(), e))
        producer.poll(0.1)
    assert producer.flush(120) == 0
    producer.poll(1)
    assert outcomes.errors == [] and outcomes.count(hot) > 0
    assert gateway.runtime.topic_refusals == 0
    assert any(t > 0 for t in throttles)
