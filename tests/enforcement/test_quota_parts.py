"""The pure parts of quota enforcement: produce-topic parsing, KIP-219 combination, the usage
writer, the quota store, settings and the metrics snapshot."""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.gateway.config import ConfigError
from quotagate.gateway.exchange import ConnectionInfo, Exchange
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.headers import HeaderError, parse_request_header
from quotagate.protocol.kio_nested import build, nested
from quotagate.protocol.produce_topics import produce_topic_bytes
from quotagate.quota import choose_throttle
from quotagate.quota.controller_mutation import ThrottlingQuotaExceeded
from quotagate.store.quotas import Change, QuotaStore
from quotagate.usage.schema import USAGE_SCHEMA, UsageEvent
from quotagate.usage.writer import UsageWriter, UsageWriterSettings


def _produce_frame(version: int, topics: list[tuple[str, list[int]]]) -> bytes:
    schema: Any = api_table.request_schema(api_keys.PRODUCE, version)
    topic_cls = nested(schema, "TopicProduceData")
    partition_cls = nested(schema, "PartitionProduceData")
    request = build(
        schema,
        transactional_id="tx" if version >= 3 else None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(
            build(
                topic_cls,
                name=name,
                topic_id=uuid.UUID(int=len(name)),
                partition_data=tuple(
                    build(partition_cls, index=i, records=b"r" * size)
                    for i, size in enumerate(sizes)
                ),
            )
            for name, sizes in topics
        ),
    )
    return codec.encode_request_frame(request, 7, "client")


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_produce_topic_bytes_by_version(version: int) -> None:
    frame = _produce_frame(version, [("alpha", [10, 20]), ("beta", [5]), ("alpha", [1])])
    assert produce_topic_bytes(frame, parse_request_header(frame)) == [("alpha", 31), ("beta", 5)]


def test_produce_topic_ids_from_v13() -> None:
    frame = _produce_frame(13, [("ab", [4])])
    assert produce_topic_bytes(frame, parse_request_header(frame)) == [(str(uuid.UUID(int=2)), 4)]


def test_kip_219_max_ties_go_to_request() -> None:
    assert choose_throttle(0, [("produce", 0)]) == (0, "")
    assert choose_throttle(5, [("produce", 5)]) == (5, "request")
    assert choose_throttle(4, [("produce", 5), ("topic_bytes_in", 5)]) == (5, "produce")
    assert choose_throttle(4, [("produce", 3), ("topic_bytes_in", 6)]) == (6, "topic_bytes_in")


def _event(ts_ms: int, n: int = 0) -> UsageEvent:
    return UsageEvent(
        ts_ms=ts_ms,
        gateway_id="g",
        listener="PLAINTEXT",
        principal="User:ANONYMOUS",
        client_id=f"c{n}",
        client_host="127.0.0.1",
        api_key=0,
        api_version=9,
        request_bytes=100 + n,
        topics=[("t", n)],
    )


def test_usage_writer_partitions_rolls_and_flushes(tmp_path: Path) -> None:
    writer = UsageWriter(UsageWriterSettings(tmp_path, "g", roll_bytes=2000, row_group_rows=10))
    hour = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
    for n in range(100):
        writer.submit(_event(hour + n, n))
    writer.submit(_event(hour + 3_600_000, 100))  # the next hour
    writer.close()
    files = sorted(tmp_path.rglob("*.parquet"))
    assert {f.parent.name for f in files} == {"hour=22", "hour=23"}
    assert len(files) > 2, "rolled by size"
    assert not list(tmp_path.rglob(".*inprogress"))
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("request_bytes").to_pylist()) == [100 + n for n in range(101)]
    assert table.select(USAGE_SCHEMA.names).schema == USAGE_SCHEMA
    assert writer.dropped == 0 and writer.written == 101


def test_usage_writer_drops_instead_of_blocking(tmp_path: Path) -> None:
    writer = UsageWriter(UsageWriterSettings(tmp_path, "g", queue_size=5, flush_interval_s=60))
    started = time.monotonic()
    accepted = sum(writer.submit(_event(1_700_000_000_000, n)) for n in range(10_000))
    assert time.monotonic() - started < 2
    writer.close()
    assert writer.dropped == 10_000 - accepted > 0
    assert writer.written == accepted
    assert not writer.submit(_event(1_700_000_000_000))


def test_quota_store_is_idempotent_and_audited(tmp_path: Path) -> None:
    store = QuotaStore.open(tmp_path / "q.db")
    entity = {"user": "alice", "client-id": None}
    applied = store.alter_client_quotas(
        [Change(entity, "producer_byte_rate", 10.0), Change(entity, "request_percentage", 5.0)],
        "User:admin",
        "test",
    )
    assert len(applied) == 2
    assert store.alter_client_quotas([Change(entity, "producer_byte_rate", 10.0)], "x", "t") == []
    assert (
        store.alter_client_quotas([Change({"user": "b"}, "producer_byte_rate", None)], "x", "t")
        == []
    )
    store.alter_client_quotas([Change(entity, "request_percentage", None)], "User:admin", "test")
    assert store.client_quotas() == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 10.0}
    }
    assert [(a.quota_key, a.old_value, a.new_value) for a in store.audit()] == [
        ("producer_byte_rate", None, 10.0),
        ("request_percentage", None, 5.0),
        ("request_percentage", 5.0, None),
    ]
    assert store.set_topic_threshold("t", 5.0, "u", "s")
    assert not store.set_topic_threshold("t", 5.0, "u", "s")
    assert store.topic_thresholds() == {"t": 5.0}


def test_settings_parse_kafka_names_and_reject_mistakes() -> None:
    settings = QuotaSettings.parse(
        {"quota": {"window": {"num": 5}}, "super.users": ["User:admin"]},
        {"path": "usage", "roll.interval.seconds": 60},
    )
    assert settings.window_num == 5 and settings.super_users == frozenset({"User:admin"})
    assert settings.usage.path == Path("usage") and settings.usage.roll_interval_s == 60
    with pytest.raises(ConfigError, match="unknown key"):
        QuotaSettings.parse({"quota.window.nmu": 3})
    with pytest.raises(ConfigError, match="reject"):
        QuotaSettings.parse({"topic.bytes.in.mode": "drop"})


def test_metrics_named_after_kafka_and_expire_with_sensors() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.alter_client_quotas([Change({"client-id": "c"}, "producer_byte_rate", 100.0)], "t", "t")
    now = 1_700_000_000_000
    runtime.managers.produce.record_and_get_throttle_ms("alice", "c", 5000, now)
    runtime.managers.produce.throttle("alice", "c", 1, 40, now)
    runtime.alter_client_quotas(
        [Change({"client-id": "m"}, "controller_mutation_rate", 2.0)], "t", "t"
    )
    runtime.managers.controller.new_strict_quota("bob", "m", now).record(30, now)
    runtime.managers.controller.throttle("bob", "m", 2, 700, now)
    runtime.last_now_ms = now
    runtime.tick(now)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    text = generate_latest(registry).decode()
    assert 'quotagate_produce_byte_rate{client_id="c",user=""} 500.0' in text
    assert 'quotagate_produce_quota{client_id="c",user=""} 100.0' in text
    assert 'quotagate_produce_throttle_time{client_id="c",user=""} 40.0' in text
    assert "quotagate_produce_queue_size 1.0" in text
    assert "quotagate_request_exempt_request_time" in text
    assert 'quotagate_controllermutation_tokens{client_id="m",user=""} -8.0' in text
    assert 'quotagate_controllermutation_quota{client_id="m",user=""} 2.0' in text
    assert 'quotagate_controllermutation_throttle_time{client_id="m",user=""} 700.0' in text
    assert "quotagate_controllermutation_queue_size 1.0" in text
    runtime.tick(now + 3_600_001 + 1)
    later = generate_latest(registry).decode()
    assert 'quotagate_produce_byte_rate{client_id="c"' not in later
    assert "quotagate_produce_queue_size 0.0" in later


def test_idle_rates_decay_in_the_metrics() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.alter_client_quotas([Change({"client-id": "c"}, "producer_byte_rate", 100.0)], "t", "t")
    now = 1_700_000_000_000
    runtime.managers.produce.record_and_get_throttle_ms("alice", "c", 5000, now)
    runtime.last_now_ms = now
    runtime.tick(now + 60_000)  # the client went quiet a minute ago: its windows are gone
    series = dict((tuple(k), v) for k, v in runtime.snapshot["series"]["produce_byte_rate"])
    assert series == {("", "c"): 0.0}


def test_exporting_metrics_never_changes_a_throttle() -> None:
    """Kafka's measure() purges samples and refills buckets; the exporter must only peek, or
    watching the gateway would shift later throttles away from what a replay computes."""

    def run(export: bool) -> list[int]:
        runtime = QuotaRuntime(QuotaSettings())
        runtime.alter_client_quotas(
            [
                Change({"client-id": "c"}, "producer_byte_rate", 1000.0),
                Change({"client-id": "c"}, "controller_mutation_rate", 2.0),
            ],
            "t",
            "t",
        )
        start = 1_700_000_000_000
        throttles = []
        for step in range(60):
            now = start + step * 700
            throttles.append(
                runtime.managers.produce.record_and_get_throttle_ms("u", "c", 3000, now)
            )
            quota = runtime.managers.controller.new_strict_quota("u", "c", now)
            try:
                quota.record(5, now)
            except ThrottlingQuotaExceeded as refused:
                throttles.append(-refused.throttle_ms)
            throttles.append(quota.throttle_time(now))
            runtime.last_now_ms = now
            if export:
                runtime.tick(now + 25_000)
        return throttles

    assert run(export=True) == run(export=False)


class _Events:
    def __init__(self) -> None:
        self.events: list[UsageEvent] = []

    def submit(self, event: UsageEvent) -> None:
        self.events.append(event)


@pytest.mark.parametrize(
    ("host", "port", "address"),
    [("127.0.0.1", 53116, "127.0.0.1:53116"), ("::1", 9, "[::1]:9")],
)
def test_usage_event_client_host_is_the_peer_address(host: str, port: int, address: str) -> None:
    # pipeline replay treats (principal, client_id, client_host) as one connection, and broker
    # request logs name the peer as ip:port: the IP alone would merge a machine's connections.
    runtime = QuotaRuntime(QuotaSettings())
    events = _Events()
    runtime.usage = events  # type: ignore[assignment]
    frame = codec.encode_request_frame(
        build(
            api_table.request_schema(api_keys.METADATA, 12),
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        7,
        "c",
    )
    info = ConnectionInfo(1, "PLAINTEXT", "PLAINTEXT", host, port, "User:ANONYMOUS")
    exchange = Exchange(
        info, parse_request_header(frame), frame, 1_700_000_000_000, time.monotonic_ns()
    )
    exchange.response_frame = b"\x00\x00\x00\x04\x00\x00\x00\x07"
    runtime.finish(exchange, runtime.ticket(exchange))
    assert [e.client_host for e in events.events] == [address]


def test_a_topic_name_that_is_not_utf8_is_a_protocol_error() -> None:
    frame = _produce_frame(9, [("alpha", [10])])
    # Flexible versions length-prefix the name with uvarint(len + 1): swap its bytes.
    broken = frame.replace(b"alpha", b"\xff\xfelph")
    with pytest.raises(HeaderError, match="not UTF-8"):
        produce_topic_bytes(broken, parse_request_header(broken))
