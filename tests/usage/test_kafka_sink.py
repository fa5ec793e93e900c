"""The Kafka usage sink: its encoding (version 1, a schema in the repo), its [usage] keys,
and its bounds when the cluster is gone. The way to the suite's Kafka and on into the
stream job is tests/pipeline/stream/test_job.py."""

from __future__ import annotations

import dataclasses
import json
import socket

import pytest

from quotagate.enforcement.settings import KAFKA, PARQUET, QuotaSettings
from quotagate.fleet.topic_publisher import TopicPublisher
from quotagate.gateway import ConfigError
from quotagate.usage import stream
from quotagate.usage.schema import USAGE_COLUMNS, UsageEvent


def _event(n: int = 0, **changes: object) -> UsageEvent:
    event = UsageEvent(
        ts_ms=1_700_000_000_000 + n,
        gateway_id="g",
        listener="PLAINTEXT",
        principal="User:alice",
        client_id=f"c{n}",
        client_host="127.0.0.1",
        api_key=0,
        api_version=9,
        request_bytes=100 + n,
        topics=[("orders", n)],
        acks=-1,
    )
    return dataclasses.replace(event, **changes)  # type: ignore[arg-type]


def _row(event: UsageEvent) -> tuple[object, ...]:
    return dataclasses.astuple(event)


def test_a_record_is_the_documented_version_1_keyed_by_tenant_else_principal() -> None:
    key, value = stream.record(_row(_event(3)))
    document = json.loads(value)
    assert key == b"User:alice"
    assert document["v"] == stream.SCHEMA_VERSION == 1
    assert document["topics"] == [{"topic": "orders", "bytes": 3}]
    assert {name: document[name] for name in USAGE_COLUMNS if name != "topics"} == {
        name: value for name, value in _event(3).as_row().items() if name != "topics"
    }
    assert stream.record(_row(_event(3, tenant="payments")))[0] == b"payments"


def test_the_schema_in_the_repo_names_every_field_a_record_has() -> None:
    schema = stream.json_schema()
    _, value = stream.record(_row(_event()))
    fields = set(json.loads(value))
    assert set(schema["properties"]) == fields == {*USAGE_COLUMNS, "v"}
    assert set(schema["required"]) == fields
    assert schema["properties"]["v"] == {"const": stream.SCHEMA_VERSION}


def test_usage_keys_for_the_kafka_sink() -> None:
    usage = QuotaSettings.parse({}, {"sink": "kafka", "topic": "usage.v1"}).usage
    assert usage.to_kafka and not usage.to_files
    assert (usage.topic, usage.bootstrap_servers, usage.security) == ("usage.v1", None, None)
    both = QuotaSettings.parse({}, {"sink": [PARQUET, KAFKA], "path": "usage"}).usage
    assert both.to_kafka and both.to_files
    assert QuotaSettings.parse({}, {"path": "usage"}).usage.sinks == {PARQUET}
    other = QuotaSettings.parse(
        {},
        {"sink": "kafka", "bootstrap.servers": "k1:9092, k2:9092", "security.protocol": "SSL"},
    ).usage
    assert other.bootstrap_servers == "k1:9092,k2:9092"
    assert other.security is not None
    assert other.security.librdkafka_config()["security.protocol"] == "SSL"


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ({"sink": "s3"}, 'must be "parquet", "kafka" or both'),
        ({"sink": ["kafka", "parquet"]}, "no path is set"),
        ({"sink": "kafka", "security.protocol": "SSL"}, 'set [usage] "bootstrap.servers" too'),
        ({"sink": "kafka", "bootstrap.servers": "k1"}, "must list host:port pairs"),
        (
            {"sink": "kafka", "bootstrap.servers": "k1:9092", "security.protocol": "TLS"},
            "[usage]",
        ),
        ({"sink": "kafka", "topic": "a topic"}, "must be a non-empty name"),
    ],
)
def test_a_wrong_usage_key_says_what_and_how_to_fix_it(
    section: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError) as error:
        QuotaSettings.parse({}, section)
    assert says in str(error.value)


def test_with_the_cluster_gone_events_are_dropped_counted_and_memory_stays_bounded() -> None:
    # A loopback port nobody listens on: every connection attempt is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    queue_size = 1_000
    publisher = TopicPublisher(
        f"127.0.0.1:{port}",
        "usage",
        stream.record,
        queue_size=queue_size,
        close_timeout_s=1.0,
        create_topic=False,
    )
    offered = 20_000
    taken = 0
    for n in range(offered):
        taken += publisher.add(_row(_event(n)))
        if n % 500 == 0:
            publisher.flush()
    # What the event loop's side holds never exceeds the bound, whatever was offered.
    assert publisher.pending_rows <= queue_size
    publisher.close()
    assert publisher.written == 0
    # Every row is accounted for: refused by add, refused by librdkafka's full queue, or
    # purged unacknowledged at close; none was delivered, none counted twice.
    assert publisher.dropped == offered
    assert taken <= offered
