"""The controller-mutation stage on hand-built exchanges: strict KIP-599 admission topic by
topic, the refused topics answered by the gateway and merged back in request order."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime, QuotaSettings
from quotagate.enforcement.ticket import TICKET_KEY
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.kio_nested import build, nested
from quotagate.store.quotas import Change
from support.exchanges import (
    NOW_MS,
    chain,
    create_topics_request,
    exchange,
    response_body,
    run_request,
    run_response,
    sent_request,
    sent_response,
)

VERSION = 7  # strict from v6


def _enforcement(rate: float) -> QuotaEnforcement:
    runtime = QuotaRuntime(QuotaSettings(num_partitions=1))
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "admin"}, "controller_mutation_rate", rate)], "t", "t"
    )
    return QuotaEnforcement(runtime)


def _create(*topics: tuple[str, int]) -> object:
    return create_topics_request(VERSION, topics)


def _created(*names: str) -> object:
    schema = api_table.response_schema(api_keys.CREATE_TOPICS, VERSION)
    result = nested(schema, "CreatableTopicResult")
    return response_body(
        api_keys.CREATE_TOPICS,
        VERSION,
        throttle_time=datetime.timedelta(0),
        topics=tuple(
            build(
                result,
                name=name,
                topic_id=None,
                error_code=KioErrorCode(0),
                error_message=None,
                num_partitions=2,
                replication_factor=1,
                configs=None,
            )
            for name in names
        ),
    )


def test_a_strict_request_is_admitted_topic_by_topic_and_merged_in_request_order() -> None:
    stages = chain(_enforcement(rate=1).stages())  # a burst of 11 partitions
    # 10 fits; 5 drives the bucket negative but is admitted (tokens remained); 3 is refused
    # while the bucket is negative.
    ex = exchange(_create(("a", 10), ("b", 5), ("c", 3)), client_id="admin")
    seen = run_request(stages, ex)
    forwarded = sent_request(ex)
    assert [t.name for t in forwarded.topics] == ["a", "b"]
    run_response(stages, ex, seen, _created("a", "b"))
    answered = sent_response(ex)
    assert [t.name for t in answered.topics] == ["a", "b", "c"]
    assert [int(t.error_code) for t in answered.topics] == [0, 0, 89]
    assert ex.mute_ms > 0  # the refusal's throttle, muted KIP-219 style


def test_a_mutation_throttle_runs_from_the_check_not_from_the_answer() -> None:
    # Kafka's controller checks the bucket as it takes the request and answers the throttle
    # decayed by the time it then spent (spec §5.1): the client's channel is free at the
    # check + the throttle. The gateway checks as it reads, so its mute starts there too,
    # and the upstream's time to create the admitted topics is part of it.
    stages = chain(_enforcement(rate=1).stages())
    ex = exchange(_create(("a", 10), ("b", 5), ("c", 3)), client_id="admin")
    seen = run_request(stages, ex)
    run_response(stages, ex, seen, _created("a", "b"))
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ex.mute_ms > 0
    assert ex.mute_since == ex.received_ns / 1e9 + (ticket.now_ms - ex.received_ms) / 1000


def test_a_whole_request_retry_is_not_charged_for_topics_that_exist() -> None:
    # Some clients resend the whole CreateTopics after a throttle. Kafka marks the topics that
    # exist TOPIC_ALREADY_EXISTS before it applies the mutation quota, so only "c" is charged.
    enforcement = _enforcement(rate=1)
    stages = chain(enforcement.stages())
    first = exchange(_create(("a", 10), ("b", 5), ("c", 3)), client_id="admin")
    seen = run_request(stages, first)
    run_response(stages, first, seen, _created("a", "b"))
    assert set(enforcement.runtime.facts.partitions) >= {"a", "b"}
    later = NOW_MS + 60_000  # the bucket has refilled to its burst of 11
    retry = exchange(_create(("a", 10), ("b", 5), ("c", 3)), client_id="admin", now_ms=later)
    run_request(stages, retry)
    assert [t.name for t in sent_request(retry).topics] == ["a", "b", "c"]
    tokens = enforcement.runtime.managers.controller.tokens("", "admin", later)
    assert tokens == 11 - 3


def test_a_request_whose_topics_are_all_refused_is_answered_by_the_gateway() -> None:
    stages = chain(_enforcement(rate=1).stages())
    first = exchange(_create(("a", 20)), client_id="admin")
    run_response(stages, first, run_request(stages, first), _created("a"))
    refused = exchange(_create(("b", 1), ("c", 1)), client_id="admin")
    seen = run_request(stages, refused)
    assert refused.response_frame is not None  # never forwarded
    run_response(stages, refused, seen)
    answered = sent_response(refused)
    assert [int(t.error_code) for t in answered.topics] == [89, 89]
    assert answered.throttle_time.total_seconds() > 0


def test_validate_only_requests_are_not_charged() -> None:
    stages = chain(_enforcement(rate=1).stages())
    ex = exchange(
        create_topics_request(VERSION, [("a", 50)], validate_only=True), client_id="admin"
    )
    run_response(stages, ex, run_request(stages, ex), _created("a"))
    assert int(sent_response(ex).topics[0].error_code) == 0 and ex.mute_ms == 0
