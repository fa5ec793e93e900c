"""The rollup's transforms, one at a time, on a handful of events written out by hand."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

from quotagate.pipeline.events import usage_spark_schema
from quotagate.pipeline.rollup import (
    measures,
    per_entity,
    per_topic,
    per_window,
    topic_cells,
    usage_cells,
    with_event_time,
)
from quotagate.protocol import api_keys
from quotagate.quota import nanos_to_percentage
from quotagate.usage.schema import UsageEvent

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # a whole second, so windows of 1 s start at T0, T0 + 1000, ...


def _produce(ts_ms: int, client: str, size: int, **extra: object) -> UsageEvent:
    return UsageEvent(
        ts_ms=ts_ms,
        gateway_id="g",
        listener="PLAINTEXT",
        principal="User:alice",
        client_id=client,
        client_host="127.0.0.1",
        api_key=api_keys.PRODUCE,
        api_version=9,
        request_bytes=size,
        topics=[("orders", size - 100)],
        acks=1,
        gateway_time_us=40,
        upstream_time_us=60,
        **extra,  # type: ignore[arg-type]
    )


def _fetch(ts_ms: int, size: int, **extra: object) -> UsageEvent:
    return UsageEvent(
        ts_ms=ts_ms,
        gateway_id="g",
        listener="PLAINTEXT",
        principal="User:alice",
        client_id="reader",
        client_host="127.0.0.1",
        api_key=api_keys.FETCH,
        api_version=12,
        request_bytes=80,
        response_bytes=size,
        **extra,  # type: ignore[arg-type]
    )


def _events(spark: SparkSession, *events: UsageEvent) -> DataFrame:
    frame = spark.createDataFrame([e.as_row() for e in events], usage_spark_schema())
    return with_event_time(frame)


def test_cells_sum_the_events_of_one_window_and_kind(spark: SparkSession) -> None:
    events = _events(
        spark,
        _produce(T0 + 10, "p", 1000),
        _produce(T0 + 900, "p", 3000, throttle_ms=25, throttle_cause="produce"),
        _produce(T0 + 999, "p", 500),
        _produce(T0 + 1000, "p", 700),  # the next window
        _fetch(T0 + 20, 9000),
    )
    cells = {
        (r.client_id, r.window_start_ms, r.throttle_cause): r
        for r in usage_cells(events, 1).collect()
    }
    assert set(cells) == {
        ("p", T0, ""),
        ("p", T0, "produce"),
        ("p", T0 + 1000, ""),
        ("reader", T0, ""),
    }
    plain = cells["p", T0, ""]
    assert (plain.requests, plain.request_bytes, plain.time_us) == (2, 1500, 200)
    assert (plain.first_ts_ms, plain.last_ts_ms) == (T0 + 10, T0 + 999)
    throttled = cells["p", T0, "produce"]
    assert (throttled.requests, throttled.throttle_ms, throttled.throttled_requests) == (1, 25, 1)
    assert cells["reader", T0, ""].response_bytes == 9000


def test_measures_charge_each_quota_type_its_own_unit(spark: SparkSession) -> None:
    events = _events(
        spark,
        _produce(T0, "p", 1000, throttle_ms=25, throttle_cause="produce"),
        _fetch(T0, 9000),
        _fetch(T0, 4000, follower=True),  # a follower fetch is exempt from both quotas
    )
    rows = measures(usage_cells(events, 1)).collect()
    charged = {(r.client_id, r.quota_type): r for r in rows}
    # The follower fetch is in no row: reader's one request-time row is the other fetch's.
    assert set(charged) == {
        ("p", "produce"),
        ("p", "request"),
        ("reader", "fetch"),
        ("reader", "request"),
    }
    assert charged["reader", "request"].requests == 1
    produce = charged["p", "produce"]
    assert (produce.value, produce.requests, produce.throttle_ms) == (1000.0, 1, 25)
    # The produce's throttle was the produce quota's, not the request quota's.
    assert charged["p", "request"].throttle_ms == 0
    assert charged["p", "request"].value == pytest.approx(100 * nanos_to_percentage(1000))
    assert charged["reader", "fetch"].value == 9000.0


def test_a_throttled_fetch_is_charged_no_bytes(spark: SparkSession) -> None:
    """Kafka answers a throttled fetch empty and takes its bytes back (unrecordQuotaSensor),
    whichever quota throttled it: the fetch quota's value counts the request, not its bytes."""
    events = _events(
        spark,
        _fetch(T0, 9000),
        _fetch(T0 + 1, 7000, throttle_ms=300, throttle_cause="fetch"),
        _fetch(T0 + 2, 5000, throttle_ms=20, throttle_cause="request"),
    )
    fetch = [r for r in measures(usage_cells(events, 1)).collect() if r.quota_type == "fetch"]
    assert sum(r.value for r in fetch) == 9000.0
    assert sum(r.requests for r in fetch) == 3
    assert sum(r.throttle_ms for r in fetch) == 300  # the request quota's 20 ms is its own


def test_windows_rate_and_sustained_rate(spark: SparkSession) -> None:
    events = _events(
        spark,
        _produce(T0, "p", 1000),
        _produce(T0 + 1000, "p", 3000),
        _produce(T0 + 2000, "p", 5000),
    )
    keys = spark.createDataFrame(
        [("User:alice", "p", "produce", "alice", "", "alice", None, 2000.0)],
        "principal string, client_id string, quota_type string, share_user string, "
        "share_client string, entity_user string, entity_client string, quota_limit double",
    )
    rows = per_window(usage_cells(events, 1), keys, 1, 3).orderBy("window_start_ms").collect()
    assert [r.rate for r in rows] == [1000.0, 3000.0, 5000.0]
    # Two windows of history (window_num - 1): the first window alone, then pairs.
    assert [r.sustained_rate for r in rows] == [500.0, 2000.0, 4000.0]
    summary = per_entity(per_window(usage_cells(events, 1), keys, 1, 3)).collect()
    assert len(summary) == 1
    entity = summary[0]
    assert (entity.total, entity.requests, entity.active_windows) == (9000.0, 3, 3)
    assert (entity.max_rate, entity.p50_rate) == (5000.0, 3000.0)


def test_topics_add_up_per_topic_and_window(spark: SparkSession) -> None:
    events = _events(
        spark,
        _produce(T0, "p", 1100),
        _produce(T0 + 500, "q", 2100),
        _produce(T0 + 1500, "p", 600),
    )
    rows = per_topic(topic_cells(events, 1), 1).orderBy("window_start_ms").collect()
    assert [(r.topic, r.window_start_ms, r.bytes) for r in rows] == [
        ("orders", T0, 3000),
        ("orders", T0 + 1000, 500),
    ]
