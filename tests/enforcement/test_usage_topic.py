"""A gateway in front of the suite's Kafka with ``[usage] sink = ["parquet", "kafka"]``: every
usage event it writes to its files is also a record of the usage topic, keyed by principal,
in encoding version 1."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import KAFKA, PARQUET, QuotaSettings, UsageSettings
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.usage.schema import USAGE_COLUMNS
from support.kafka_cluster import KafkaCluster
from support.upstreams import Upstream

pytestmark = pytest.mark.timeout(120)


def _topic_records(kafka: KafkaCluster, topic: str, expected: int) -> list[tuple[bytes, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap(),
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    records: list[tuple[bytes, Any]] = []
    idle = 0
    try:
        while len(records) < expected and idle < 30:
            message = consumer.poll(1.0)
            if message is None:
                idle += 1
                continue
            assert message.error() is None, message.error()
            records.append((message.key(), json.loads(message.value())))
    finally:
        consumer.close()
    return records


def test_a_gateways_usage_events_reach_the_topic_as_its_files_have_them(
    kafka: KafkaCluster,
    upstream_kafka: Upstream,
    start_gateway: Callable[..., BackgroundGateway],
    tmp_path: Path,
) -> None:
    topic = f"usage-{uuid.uuid4().hex[:8]}"
    usage = UsageSettings(
        path=tmp_path / "usage",
        sinks=frozenset({PARQUET, KAFKA}),
        topic=topic,
        partitions=2,
        bootstrap_servers=kafka.bootstrap(),
    )
    runtime = QuotaRuntime(QuotaSettings(num_partitions=1, usage=usage))
    data = f"data-{topic}"
    admin = AdminClient(kafka.admin_config())
    for future in admin.create_topics([NewTopic(data, 1)]).values():
        future.result(30)
    gateway = start_gateway(upstream_kafka, plugins=[QuotaEnforcement(runtime)])
    producer = Producer({"bootstrap.servers": str(gateway.bootstrap), "client.id": "writer"})
    for n in range(20):
        producer.produce(data, value=b"x" * (100 + n))
    assert producer.flush(30) == 0
    gateway.stop()  # closes both sinks: files complete, records acknowledged

    files = ds.dataset(tmp_path / "usage", format="parquet", partitioning="hive")
    written = files.to_table(columns=list(USAGE_COLUMNS)).to_pylist()
    assert any(row["api_key"] == 0 and row["client_id"] == "writer" for row in written)
    records = _topic_records(kafka, topic, len(written))
    assert len(records) == len(written)
    assert {key for key, _ in records} == {row["principal"].encode() for row in written}
    assert all(value.pop("v") == 1 for _, value in records)

    def canonical(row: dict[str, Any]) -> str:
        return json.dumps(row, sort_keys=True)

    assert sorted(canonical(value) for _, value in records) == sorted(
        canonical(row) for row in written
    )
