"""The fetch quota stage on real encoded frames: max-bytes cap, throttled fetch answered empty
with the fetch-session semantics of spec §6.1, bytes un-recorded."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.fetch import FetchQuotaStage
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.enforcement.throttle import QuotaThrottleStage, remaining_ms
from quotagate.gateway.stages.exchange import ConnectionInfo, Exchange
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.headers import parse_request_header
from quotagate.protocol.kio_nested import build, nested
from quotagate.store.quotas import Change

VERSION = 12
QUOTA = 1000.0  # bytes per second; window 11 x 1 s -> max bytes cap 10 000
NOW = 1_700_000_000_000


def _request(session_id: int, epoch: int, max_bytes: int = 50_000_000) -> bytes:
    schema: Any = api_table.request_schema(api_keys.FETCH, VERSION)
    topic = nested(schema, "FetchTopic")
    partition = nested(schema, "FetchPartition")
    body = build(
        schema,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1_000_000,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            build(
                topic,
                topic="t",
                partitions=(
                    build(partition, partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return codec.encode_request_frame(body, 42, "consumer")


def _response(session_id: int, error: int = 0, records: bytes = b"d" * 20_000) -> bytes:
    schema: Any = api_table.response_schema(api_keys.FETCH, VERSION)
    topic = nested(schema, "FetchableTopicResponse")
    partition = nested(schema, "PartitionData")
    body = build(
        schema,
        throttle_time=datetime.timedelta(0),
        error_code=KioErrorCode(error),
        session_id=session_id,
        responses=(
            build(
                topic,
                topic="t",
                partitions=(
                    build(
                        partition,
                        partition_index=0,
                        error_code=KioErrorCode(0),
                        high_watermark=100,
                        aborted_transactions=None,
                        records=records,
                    ),
                ),
            ),
        )
        if not error
        else (),
    )
    return codec.encode_response_frame(body, 42)


def _exchange(frame: bytes, now_ms: int, read_ns: int) -> Exchange:
    info = ConnectionInfo(1, "PLAINTEXT", "PLAINTEXT", "127.0.0.1", 5555, "User:ANONYMOUS")
    return Exchange(info, parse_request_header(frame), frame, now_ms, read_ns)


def _run(
    runtime: QuotaRuntime, request: bytes, response: bytes, now_ms: int, read_ns: int = 0
) -> Exchange:
    """The request read at ``read_ns`` (monotonic; default now), answered now."""
    throttle = QuotaThrottleStage(
        runtime.ticket, runtime.connection_closed, runtime.response_throttle
    )
    fetch = FetchQuotaStage(runtime.ticket, runtime.managers, runtime.shadow)
    exchange = _exchange(request, now_ms, read_ns or time.monotonic_ns())
    throttle.on_request(exchange)
    fetch.on_request(exchange)
    exchange.response_frame = response
    fetch.on_response(exchange)
    throttle.on_response(exchange)
    return exchange


@pytest.mark.parametrize(
    ("session_id", "epoch", "expected_session"),
    [(0, -1, 0), (0, 0, 0), (77, 5, 77)],
    ids=["sessionless", "full", "incremental"],
)
def test_throttled_fetch_is_answered_empty_and_unrecorded(
    session_id: int, epoch: int, expected_session: int
) -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "consumer"}, "consumer_byte_rate", QUOTA)], "t", "t"
    )
    upstream_session = 99 if epoch == 0 else session_id
    # Read 300 ms ago; the upstream's answer (with the data) arrives only now.
    before = time.monotonic_ns()
    read_ns = before - 300_000_000
    first = _run(runtime, _request(session_id, epoch), _response(upstream_session), NOW, read_ns)
    answered_within_ms = (time.monotonic_ns() - before) // 1_000_000 + 1
    # 20 kB against 1000 B/s over at least 10 s: throttled, so nothing was sent nor counted.
    assert first.mute_ms > 1000
    response = first.response_body()
    assert response.responses == ()
    assert int(response.error_code) == 0
    assert int(response.session_id) == expected_session
    # Kafka answers a throttled fetch, empty, as it records it: the mute runs from the read
    # (the gateway's recording moment) and the answer tells what is left of the throttle.
    assert first.mute_since == read_ns / 1e9
    written = int(response.throttle_time.total_seconds() * 1000)
    assert first.mute_ms - 300 - answered_within_ms <= written <= first.mute_ms - 300
    metric = runtime.managers.fetch.quota_metric("ANONYMOUS", "consumer")
    assert metric is not None and metric.measure(NOW) == 0.0
    # The cap: max_bytes lowered to Q x (11 - 1) x 1 s, min_bytes to at most that.
    forwarded = codec.decode_request(first.request_frame, parse_request_header(first.request_frame))
    assert (int(forwarded.max_bytes), int(forwarded.min_bytes)) == (10_000, 10_000)


def test_small_fetch_passes_and_upstream_errors_are_kept() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "consumer"}, "consumer_byte_rate", QUOTA)], "t", "t"
    )
    small = _run(runtime, _request(0, -1, max_bytes=500), _response(0, records=b"d" * 100), NOW)
    assert small.mute_ms == 0 and small.response_body().responses != ()
    assert codec.decode_request(small.request_frame, small.header).max_bytes == 500
    runtime.managers.fetch.record_and_get_throttle_ms("ANONYMOUS", "consumer", 50_000, NOW + 1)
    error = _run(runtime, _request(5, 3), _response(5, error=71), NOW + 2)  # epoch moved upstream
    assert error.mute_ms > 0, "over quota: throttled"
    assert int(error.response_body().error_code) == 71, "the upstream's error is passed on"


def test_what_is_left_of_a_throttle() -> None:
    assert remaining_ms(1000, 10.0, 10.3) == 700
    assert remaining_ms(1000, 10.0, 10.0004) == 1000
    assert remaining_ms(1000, 10.0, 12.0) == 0
