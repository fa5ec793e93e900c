"""KIP-599 through the gateway: per-topic admission against the token bucket, error 89,
the spec's throttle, permissive old versions, and APIs the upstream lacks."""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.kio_nested import build, nested
from quotagate.store.quotas import Change
from support.exchanges import create_topics_request

pytestmark = pytest.mark.integration

RATE = 2.0  # partitions per second
WINDOWS = 10  # burst = 10 windows x 1 s x 2/s = 20 partitions (spec §9.6 integration test)
BURST = RATE * WINDOWS


def _results(response: Any) -> dict[str, tuple[int, str | None]]:
    return {str(t.name): (int(t.error_code), t.error_message) for t in response.topics}


def _throttle(response: Any) -> int:
    return int(response.throttle_time.total_seconds() * 1000)


def _usage(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = (
        ds.dataset(path, format="parquet", partitioning="hive").to_table().to_pylist()
    )
    return sorted(rows, key=lambda r: r["ts_ms"])


def _names(prefix: str, *counts: int) -> list[tuple[str, int]]:
    return [(f"{prefix}-{i}-{uuid.uuid4().hex[:6]}", n) for i, n in enumerate(counts)]


def test_storm_admits_by_token_bucket_rejects_with_89_and_merges(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any, tmp_path: Path
) -> None:
    usage_dir = tmp_path / "usage"
    gateway = start_quota_gateway(
        quota_upstream,
        quotas={"controller.quota.window.num": WINDOWS, "controller.quota.window.size.seconds": 1},
        usage={"path": str(usage_dir)},
    )
    gateway.runtime.store_sync.alter_client_quotas(
        [
            Change({"client-id": "storm"}, "controller_mutation_rate", RATE),
            Change({"client-id": "storm5"}, "controller_mutation_rate", RATE),
        ],
        "test",
        "test",
    )
    host, port = gateway.host_port
    strict = _names("strict", 10, 10, 5, 1)
    follow = _names("follow", 1)
    permissive = _names("permissive", 15, 10)
    permissive_follow = _names("permissive-follow", 5)
    with (
        raw_client(host, port, "storm") as first,
        raw_client(host, port, "storm") as second,
        raw_client(host, port, "storm5") as third,
        raw_client(host, port, "storm5") as fourth,
    ):
        strict_response = first.send(create_topics_request(7, strict))
        follow_response = second.send(create_topics_request(7, follow))
        permissive_response = third.send(create_topics_request(5, permissive))
        permissive_follow_response = fourth.send(create_topics_request(5, permissive_follow))
        metadata = first.request(
            api_keys.METADATA,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    gateway.stop()  # flushes the usage events
    existing = {str(t.name) for t in metadata.topics if int(t.error_code) == 0}

    # One request: 20 tokens; 10 and 10 leave 0, 5 is still admitted (tokens >= 0 before it,
    # the strict rule), 1 is refused at -5 tokens with a throttle of 5 / 2 per second.
    results = _results(strict_response)
    assert [results[name][0] for name, _ in strict] == [0, 0, 0, 89]
    assert results[strict[3][0]][1] == "The throttling quota has been exceeded."
    assert [str(t.name) for t in strict_response.topics] == [name for name, _ in strict]
    assert _throttle(strict_response) == 2500
    assert {name for name, _ in strict[:3]} <= existing
    assert strict[3][0] not in existing

    events = [e for e in _usage(usage_dir) if e["api_key"] == api_keys.CREATE_TOPICS]
    assert [e["client_id"] for e in events] == ["storm", "storm", "storm5", "storm5"]
    first_ts, follow_ts = events[0]["ts_ms"], events[1]["ts_ms"]
    # The next request finds the bucket refilled by 2 tokens/s since: still negative.
    tokens = -5 + RATE * (follow_ts - first_ts) / 1000
    assert tokens < 0
    assert _results(follow_response)[follow[0][0]][0] == 89
    assert _throttle(follow_response) == round(-tokens / RATE * 1000)
    assert events[0]["partition_mutations"] == 26  # demand: refused topics count too
    assert events[0]["error_code"] == 89
    assert events[0]["throttle_cause"] == "controller_mutation"

    # v5 is permissive: everything admitted, throttled instead.
    assert all(code == 0 for code, _ in _results(permissive_response).values())
    assert _throttle(permissive_response) == 2500
    p_first, p_follow = events[2]["ts_ms"], events[3]["ts_ms"]
    tokens = BURST - 25 + RATE * (p_follow - p_first) / 1000 - 5
    assert _results(permissive_follow_response)[permissive_follow[0][0]][0] == 0
    assert _throttle(permissive_follow_response) == round(-tokens / RATE * 1000)
    assert {name for name, _ in permissive + permissive_follow} <= existing


def test_validate_only_is_exempt(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    gateway = start_quota_gateway(quota_upstream, quotas={"controller.quota.window.num": WINDOWS})
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "validator"}, "controller_mutation_rate", RATE)], "test", "test"
    )
    host, port = gateway.host_port
    with raw_client(host, port, "validator") as client:
        big = _names("validate", 100)
        response = client.send(create_topics_request(7, big, validate_only=True))
        assert _throttle(response) == 0
        assert all(code == 0 for code, _ in _results(response).values())
        # Had the 100 validated partitions been charged, the bucket would be at -80 now.
        real = _names("real", 20, 1, 1)
        admitted = client.send(create_topics_request(7, real))
        assert [_results(admitted)[name][0] for name, _ in real] == [0, 0, 89]
        assert _throttle(admitted) == 500


def test_create_partitions_strict_and_permissive(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    """CreatePartitions counts ``count - current partitions`` against the bucket: v3 is
    strict (refused with 89 while the bucket is negative), v2 permissive (admitted, the
    client throttled). Kafka's controller then really adds the partitions; tansu has no
    CreatePartitions, so the gateway answers UNSUPPORTED_VERSION itself."""
    gateway = start_quota_gateway(quota_upstream, quotas={"controller.quota.window.num": WINDOWS})
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "grower"}, "controller_mutation_rate", RATE)], "test", "test"
    )
    host, port = gateway.host_port
    _await_upstream_apis(gateway)
    grow, more = (name for name, _ in _names("grow", 1, 1))
    with raw_client(host, port, "creator") as creator:
        created = creator.send(create_topics_request(7, [(grow, 1), (more, 1)]))
        assert all(code == 0 for code, _ in _results(created).values())
    with raw_client(host, port, "grower") as grower:
        # 29 mutations on a full bucket of 20: admitted whole, the bucket at -9.
        first = grower.send(_create_partitions_request([grow], count=30, version=3))
        strict = grower.send(_create_partitions_request([more], count=3, version=3))
        permissive = grower.send(_create_partitions_request([more], count=3, version=2))
    codes = [[int(r.error_code) for r in answer.results] for answer in (first, strict, permissive)]
    if not quota_upstream.is_kafka:
        assert codes == [[35], [35], [35]]
        return
    assert codes == [[0], [89], [0]]
    # Refilling the 9 tokens at 2 a second, less the moments between the requests.
    assert 4000 <= _throttle(strict) <= 4500
    assert _throttle(permissive) > 0  # the rate over the quota, as Kafka's permissive quota has it
    partitions = _partitions(raw_client, host, port)
    assert (partitions[grow], partitions[more]) == (30, 3)


def _partitions(raw_client: Any, host: str, port: int) -> dict[str, int]:
    """Every topic the cluster has, with its partition count (a Metadata request)."""
    with raw_client(host, port, "observer") as observer:
        metadata = observer.request(
            api_keys.METADATA,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    return {str(t.name): len(t.partitions) for t in metadata.topics}


def _await_upstream_apis(gateway: Any) -> None:
    """Until the gateway learned the upstream's APIs (tansu: no CreatePartitions)."""
    deadline = time.monotonic() + 10
    while gateway.runtime.facts.api_keys is None and time.monotonic() < deadline:
        time.sleep(0.05)


def _create_partitions_request(names: list[str], count: int, version: int) -> Any:
    schema: Any = api_table.request_schema(api_keys.CREATE_PARTITIONS, version)
    topic_cls = nested(schema, "CreatePartitionsTopic")
    return build(
        schema,
        topics=tuple(build(topic_cls, name=n, count=count, assignments=None) for n in names),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )


def _delete_request(names: list[str]) -> Any:
    schema: Any = api_table.request_schema(api_keys.DELETE_TOPICS, 6)
    topic_cls = nested(schema, "DeleteTopicState")
    return build(
        schema,
        topics=tuple(build(topic_cls, name=name, topic_id=uuid.UUID(int=0)) for name in names),
        timeout=datetime.timedelta(seconds=30),
    )


def test_delete_topics_counts_the_partitions_the_gateway_has_seen(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any, tmp_path: Path
) -> None:
    usage_dir = tmp_path / "usage"
    # The same 20-partition burst refilled 20 times slower than RATE, so that however
    # loaded the machine, the second delete still finds the bucket negative (50 s to refill
    # the 5 tokens the first one overdraws).
    slow_rate, windows = RATE / 20, WINDOWS * 20
    gateway = start_quota_gateway(
        quota_upstream,
        quotas={"controller.quota.window.num": windows},
        usage={"path": str(usage_dir)},
    )
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "deleter"}, "controller_mutation_rate", slow_rate)], "test", "test"
    )
    host, port = gateway.host_port
    topics = _names("doomed", 10, 10, 5, 3)
    with raw_client(host, port, "creator") as creator:
        created = creator.send(create_topics_request(7, topics))
        assert all(code == 0 for code, _ in _results(created).values())
    with raw_client(host, port, "deleter") as first, raw_client(host, port, "deleter") as second:
        deleted = first.send(_delete_request([name for name, _ in topics[:3]]))
        refused = second.send(_delete_request([topics[3][0]]))
    gateway.stop()
    assert [int(r.error_code) for r in deleted.responses] == [0, 0, 0]
    assert int(deleted.throttle_time.total_seconds()) == 0  # strict: admitted down to -5
    assert [(r.name, int(r.error_code)) for r in refused.responses] == [(topics[3][0], 89)]
    events = [e for e in _usage(usage_dir) if e["api_key"] == api_keys.DELETE_TOPICS]
    assert [e["partition_mutations"] for e in events] == [25, 3]
    tokens = BURST - 25 + slow_rate * (events[1]["ts_ms"] - events[0]["ts_ms"]) / 1000
    assert _throttle(refused) == round(-tokens / slow_rate * 1000)


def test_a_body_the_gateway_cannot_decode_is_never_forwarded_uncharged(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    """A modelled version whose body does not decode (here: a trailing byte) must not slip
    past the mutation quota to the upstream: the gateway closes the connection instead."""
    gateway = start_quota_gateway(quota_upstream)
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "sly"}, "controller_mutation_rate", 0.1)], "test", "test"
    )
    host, port = gateway.host_port
    name = f"sly-{uuid.uuid4().hex[:6]}"
    frame = codec.encode_request_frame(create_topics_request(7, [(name, 50)]), 1, "sly")
    padded = struct.pack(">i", len(frame) - 4 + 1) + frame[4:] + b"\x00"
    with raw_client(host, port, "sly") as sly:
        sly.send_frame(padded)
        with pytest.raises(ConnectionError):
            sly.read_frame()
    topics = _partitions(raw_client, host, port)
    gateway.stop()
    assert name not in topics
