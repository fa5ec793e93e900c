"""Produce: the ``producer_byte_rate`` quota and the per-topic bytes-in thresholds.

On arrival the request is admitted by the engine (:func:`quotagate.quota.admit`: its size,
Kafka's ``request.sizeInBytes``, on the produce quota), and each topic's record bytes are
checked against the thresholds, which are the gateway's own
(:class:`~quotagate.enforcement.topic_admission.TopicAdmission`). In
``reject`` mode the refused topics are cut out of the request and answered by the gateway
with a retriable error (:data:`REFUSAL_ERROR`), the rest is forwarded, and the two halves are
merged into one response. A throttled produce stops the connection from being read at once,
as a broker, which reads one request at a time, would not read the next one either.

acks=0 requests get no response: their whole KIP-219 decision is made here (request time is
exempt, spec §4), and a refused acks=0 request closes the connection, as a broker does when
an acks=0 produce fails.

Produce v0-2 (removed in Kafka 4.0, not modelled by kio) are metered the same way: their
topics, acks and record bytes are read by hand, refused topics are cut out of the request's
bytes and their answers appended to the upstream's response by hand
(:mod:`quotagate.protocol.removed_versions`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.throttle import ResponseThrottle
from quotagate.enforcement.ticket import QuotaTicket
from quotagate.enforcement.topic_admission import TopicAdmission
from quotagate.gateway import Exchange, Stage, StateKey, refuse_unmodelled
from quotagate.protocol import api_keys, api_table, removed_versions
from quotagate.protocol.codec import CodecError
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota import QuotaManagers, admit

REFUSAL_ERROR: Final = ErrorCode.NOT_ENOUGH_REPLICAS
"""Why NOT_ENOUGH_REPLICAS (19): it is retriable in librdkafka (retried, and known not to be
persisted, so safe with idempotence), in kafka-python and in aiokafka (``retriable = True``),
and none of them treats it as fatal or refreshes metadata for it. THROTTLING_QUOTA_EXCEEDED
(89) is not retried on produce by librdkafka. tests/enforcement/test_topic_thresholds.py proves
the retries with all three clients."""
REFUSAL_MESSAGE: Final = "quotagate: topic bytes-in over its threshold, retry later"


class ProduceQuotaStage(Stage):
    name: ClassVar[str] = "produce-quota"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.PRODUCE})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.PRODUCE})

    def __init__(
        self,
        ticket: Callable[[Exchange], QuotaTicket],
        managers: QuotaManagers,
        topics: TopicAdmission,
        throttle: ResponseThrottle,
    ) -> None:
        """``throttle``: the KIP-219 step, which an acks=0 request (no response) takes here."""
        self._ticket = ticket
        self._managers = managers
        self._topics = topics
        self._throttle = throttle

    def on_request(self, exchange: Exchange) -> None:
        ticket = self._ticket(exchange)
        header = exchange.header
        managers = self._managers
        tenants = managers.tenant_level(ticket.tenant)
        applies = (
            managers.produce.quota_applies(ticket.user, ticket.client_id)
            or self._topics.applies
            or (tenants is not None and tenants.produce.quota_applies(ticket.tenant, ""))
        )
        if refuse_unmodelled(exchange, applies) or header.body_offset < 0:
            return  # closed, or a version newer than the gateway knows, unbounded: forwarded
        ticket.topics = exchange.produce_topics()
        ticket.acks = exchange.acks
        charging = ticket.charging(header.api_key, header.api_version)
        facts = ticket.facts(charging, header.api_key, header.api_version)
        ticket.admission = admit(managers, facts)
        refused, wait_ms = self._topics.check(
            ticket.topics, ticket.now_ms, ticket.client_id, exchange.principal
        )
        ticket.topic_bytes_in_ms = max(ticket.topic_bytes_in_ms, wait_ms)
        if ticket.produce_ms > 0 or ticket.topic_bytes_in_ms > 0:
            exchange.hold_reading()
        if refused:
            ticket.impose_error(REFUSAL_ERROR)
            if ticket.acks == 0:
                exchange.close("acks=0 produce refused: topic bytes-in over threshold")
                return
            self._cut(exchange, refused)
            return
        if ticket.acks == 0:
            self._throttle.finish(exchange, ticket)

    def on_response(self, exchange: Exchange) -> None:
        removed = exchange.get(_REMOVED_REFUSED_KEY)
        if removed and exchange.response_frame is not None:
            exchange.replace_response_frame(
                removed_versions.produce_response_with(
                    exchange.response_frame, exchange.api_version, removed, REFUSAL_ERROR
                )
            )
            return
        refused = exchange.get(_REFUSED_KEY)
        if refused and exchange.response_frame is not None:
            response = exchange.response_body()
            merged = dataclasses.replace(
                response, responses=(*response.responses, *self._refused_results(exchange))
            )
            exchange.replace_response(merged)

    # -- partial answers -------------------------------------------------------------------

    def _cut(self, exchange: Exchange, refused: set[str]) -> None:
        if api_table.is_removed(api_keys.PRODUCE, exchange.api_version):
            self._cut_removed(exchange, refused)
            return
        try:
            request = exchange.request_body()
        except CodecError as exc:
            exchange.close(f"cannot refuse produce topics: {exc}")
            return
        keep: list[Any] = []
        drop: list[Any] = []
        for topic in request.topic_data:
            (drop if _topic_name(topic) in refused else keep).append(topic)
        exchange.put(_REFUSED_KEY, drop)
        if keep:
            exchange.replace_request(dataclasses.replace(request, topic_data=tuple(keep)))
            return
        schema: Any = api_table.response_schema(api_keys.PRODUCE, exchange.api_version)
        exchange.respond(build(schema, responses=tuple(self._refused_results(exchange))))

    def _cut_removed(self, exchange: Exchange, refused: set[str]) -> None:
        header = exchange.header
        request = removed_versions.read_produce(exchange.request_frame, header)
        drop = [t for t in request.topics if t.name in refused]
        if len(drop) < len(request.topics):
            exchange.put(_REMOVED_REFUSED_KEY, drop)
            exchange.replace_request_frame(
                removed_versions.produce_without(exchange.request_frame, request, refused)
            )
            return
        exchange.respond_frame(
            removed_versions.produce_refused_response(
                header.correlation_id, header.api_version, drop, REFUSAL_ERROR
            )
        )

    def _refused_results(self, exchange: Exchange) -> list[Any]:
        schema: Any = api_table.response_schema(api_keys.PRODUCE, exchange.api_version)
        topic_cls = nested(schema, "TopicProduceResponse")
        partition_cls = nested(schema, "PartitionProduceResponse")
        error = KioErrorCode(REFUSAL_ERROR)
        results = []
        for topic in exchange.get(_REFUSED_KEY) or ():
            partitions = tuple(
                build(
                    partition_cls,
                    index=p.index,
                    error_code=error,
                    base_offset=-1,
                    log_append_time=None,
                    log_start_offset=-1,
                    record_errors=(),
                    error_message=REFUSAL_MESSAGE,
                )
                for p in topic.partition_data
            )
            results.append(
                build(
                    topic_cls,
                    name=getattr(topic, "name", None),
                    topic_id=getattr(topic, "topic_id", None),
                    partition_responses=partitions,
                )
            )
        return results


_REFUSED_KEY: Final = StateKey[list[Any]]("produce.refused")
_REMOVED_REFUSED_KEY: Final = StateKey[list[removed_versions.ProduceTopic]](
    "produce.removed_refused"
)


def _topic_name(topic: Any) -> str:
    name = getattr(topic, "name", None)
    return str(name) if name is not None else str(topic.topic_id)
