"""request_percentage (KIP-124) under a Metadata storm, and usage events read back."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from quotagate.pipeline.replay.core import replay_frame
from quotagate.protocol import api_keys
from quotagate.store.quotas import Change
from quotagate.usage.schema import USAGE_SCHEMA

pytestmark = pytest.mark.integration

MAX_REQUESTS = 2000


def _metadata(client: Any) -> Any:
    return client.request(
        api_keys.METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def test_metadata_storm_is_throttled_within_one_window_and_muted(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any, tmp_path: Path
) -> None:
    usage = tmp_path / "usage"
    gateway = start_quota_gateway(quota_upstream, usage={"path": str(usage)})
    # 0.1 % of one thread: 1 ms of charged time per second.
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "hammer"}, "request_percentage", 0.1)], "test", "test"
    )
    host, port = gateway.host_port
    throttles: list[int] = []
    gaps: list[tuple[int, float]] = []
    with raw_client(host, port, "hammer") as client:
        previous = time.monotonic()
        # Hammer until 10 responses came back throttled (each mute costs up to a second).
        while len(throttles) < MAX_REQUESTS and sum(t > 0 for t in throttles) < 10:
            response = _metadata(client)
            now = time.monotonic()
            if throttles:
                gaps.append((throttles[-1], now - previous))
            throttles.append(int(response.throttle_time.total_seconds() * 1000))
            previous = now
    gateway.stop()
    assert any(t > 0 for t in throttles), "the storm was never throttled"
    assert max(throttles) <= 1000, "a request-time throttle never exceeds one window"
    # The connection was muted: the next response could not come before the throttle ended.
    for throttle, gap in gaps:
        assert gap >= throttle / 1000 * 0.99 - 0.002
    rows = ds.dataset(usage, format="parquet", partitioning="hive").to_table().to_pylist()
    storm = [r for r in rows if r["client_id"] == "hammer" and r["api_key"] == api_keys.METADATA]
    assert len(storm) == len(throttles)
    assert [r["throttle_ms"] for r in sorted(storm, key=lambda r: r["ts_ms"])] == throttles
    assert {r["throttle_cause"] for r in storm if r["throttle_ms"]} == {"request"}
    # Metadata cannot wait in purgatory: its upstream time is charged.
    assert all(r["upstream_time_us"] > 0 for r in storm)
    # The pipeline's replay, fed the events, reproduces every throttle (docs/quotas.md).
    replayed = replay_frame(
        pd.DataFrame(storm),
        '[[quota]]\n"client-id" = "hammer"\nrequest_percentage = 0.1\n',
        closed_loop=False,
    )
    assert (replayed["predicted_throttle_ms"] == replayed["throttle_ms"]).all()
    assert (replayed["predicted_cause"] == replayed["throttle_cause"]).all()


def test_usage_events_match_schema_and_requests(
    quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    usage = tmp_path / "usage"
    gateway = start_quota_gateway(quota_tansu.bootstrap, usage={"path": str(usage)})
    producer = Producer(
        {"bootstrap.servers": gateway.bootstrap, "client.id": "usage-client", "linger.ms": 0}
    )
    for topic, size in (("usage-a", 100), ("usage-b", 2000), ("usage-a", 300)):
        producer.produce(topic, b"x" * size)
        assert producer.flush(30) == 0
    gateway.stop()
    files = list(usage.rglob("*.parquet"))
    assert files and all(f.parent.name.startswith("hour=") for f in files)
    assert all(f.parent.parent.name.startswith("date=") for f in files)
    for file in files:
        assert pq.read_schema(file).remove_metadata() == USAGE_SCHEMA
    rows = ds.dataset(usage, format="parquet", partitioning="hive").to_table().to_pylist()
    mine = [r for r in rows if r["client_id"] == "usage-client"]
    assert {r["principal"] for r in mine} == {"User:ANONYMOUS"}
    assert {r["listener"] for r in mine} == {"PLAINTEXT"}
    # The peer address of each connection (bootstrap and broker port), not just its IP: a
    # replay tells connections apart by it.
    hosts = {r["client_host"] for r in mine}
    assert len(hosts) >= 2
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", h) for h in hosts), hosts
    produced = [r for r in mine if r["api_key"] == api_keys.PRODUCE]
    per_topic: dict[str, list[int]] = {}
    for row in produced:
        assert row["response_bytes"] > 0 and row["request_bytes"] > sum(
            t["bytes"] for t in row["topics"]
        )
        for entry in row["topics"]:
            per_topic.setdefault(entry["topic"], []).append(entry["bytes"])
    # Record-batch bytes per topic: each batch is the value plus its framing (<= 100 bytes).
    assert sorted(per_topic) == ["usage-a", "usage-b"]
    assert all(
        0 < b - s <= 100 for b, s in zip(sorted(per_topic["usage-a"]), (100, 300), strict=True)
    )
    assert 0 < per_topic["usage-b"][0] - 2000 <= 100
    assert {r["api_key"] for r in mine} >= {api_keys.API_VERSIONS, api_keys.METADATA}
    assert all(r["ts_ms"] > 1_600_000_000_000 and r["throttle_ms"] == 0 for r in mine)
    assert all(r["gateway_time_us"] > 0 for r in mine)
