"""The produce quota stage on hand-built exchanges: a throttled produce holds the connection
and is muted once answered; an acks=0 produce is decided on arrival (it has no response)."""

from __future__ import annotations

import datetime

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime, QuotaSettings
from quotagate.enforcement.ticket import TICKET_KEY
from quotagate.gateway import StageChain
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota import Cause
from quotagate.store.quotas import Change
from support.exchanges import (
    chain,
    exchange,
    request_body,
    response_body,
    run_request,
    run_response,
)

VERSION = 9


def _stages(runtime: QuotaRuntime) -> StageChain:
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "producer"}, "producer_byte_rate", 1000)], "t", "t"
    )
    return chain(QuotaEnforcement(runtime).stages())


def _produce(acks: int, size: int) -> object:
    schema = api_table.request_schema(api_keys.PRODUCE, VERSION)
    topic = nested(schema, "TopicProduceData")
    partition = nested(schema, "PartitionProduceData")
    return request_body(
        api_keys.PRODUCE,
        VERSION,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            build(
                topic,
                name="orders",
                partition_data=(build(partition, index=0, records=b"r" * size),),
            ),
        ),
    )


def _produced() -> object:
    return response_body(
        api_keys.PRODUCE, VERSION, responses=(), throttle_time=datetime.timedelta(0)
    )


def test_a_produce_over_its_quota_holds_the_connection_and_is_muted() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    stages = _stages(runtime)
    ex = exchange(_produce(acks=1, size=50_000), client_id="producer")
    seen = run_request(stages, ex)
    assert ex.hold  # read no further request: a broker reads one at a time
    run_response(stages, ex, seen, _produced())
    assert ex.mute_ms > 0


def test_an_acks_zero_produce_is_decided_on_arrival_and_exempt_from_request_time() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    stages = _stages(runtime)
    ex = exchange(_produce(acks=0, size=50_000), client_id="producer")
    run_request(stages, ex)
    assert ex.mute_ms > 0 and ex.response_frame is None
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ticket.finished and ticket.acks == 0
    charging = ticket.charging(api_keys.PRODUCE, VERSION)
    assert not charging.request_time
    assert ticket.other_throttles(charging.other)[0][0] is Cause.PRODUCE


def test_a_produce_throttle_runs_from_the_written_response_as_kafkas_does() -> None:
    # Kafka records produce bytes after the append and starts the throttle then: the
    # gateway's equivalent of that moment is the upstream's answer, so the mute has no start
    # of its own (it runs from the written response).
    runtime = QuotaRuntime(QuotaSettings())
    stages = _stages(runtime)
    ex = exchange(_produce(acks=1, size=50_000), client_id="producer")
    seen = run_request(stages, ex)
    run_response(stages, ex, seen, _produced())
    assert ex.mute_ms > 0 and ex.mute_since == 0.0
