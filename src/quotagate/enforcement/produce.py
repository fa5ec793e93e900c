"""Produce: the ``producer_byte_rate`` quota and the per-topic bytes-in thresholds.

On arrival the request is admitted by the engine (:func:`quotagate.quota.admit`: its size,
Kafka's ``request.sizeInBytes``, on the produce quota), and each topic's record bytes are
checked against the thresholds, which are the gateway's own. In
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
import logging
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.ticket import QuotaTicket
from quotagate.gateway import Exchange, Stage, StateKey, refuse_unmodelled
from quotagate.logs import kv
from quotagate.protocol import api_keys, api_table, removed_versions
from quotagate.protocol.codec import CodecError
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota import TopicBytesInQuota, admit

log = logging.getLogger(__name__)

REFUSAL_ERROR: Final = ErrorCode.NOT_ENOUGH_REPLICAS
"""Why NOT_ENOUGH_REPLICAS (19): it is retriable in librdkafka (retried, and known not to be
persisted, so safe with idempotence), in kafka-python and in aiokafka (``retriable = True``),
and none of them treats it as fatal or refreshes metadata for it. THROTTLING_QUOTA_EXCEEDED
(89) is not retried on produce by librdkafka. tests/quotas/test_topic_thresholds.py proves
the retries with all three clients."""
REFUSAL_MESSAGE: Final = "quotagate: topic bytes-in over its threshold, retry later"
_REFUSAL_LOG_INTERVAL_MS: Final = 1000


class ProduceQuotaStage(Stage):
    name: ClassVar[str] = "produce-quota"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.PRODUCE})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.PRODUCE})

    def __init__(self, runtime: QuotaRuntime) -> None:
        self.runtime = runtime
        self._refusal_log: dict[str, tuple[int, int]] = {}

    def on_request(self, exchange: Exchange) -> None:
        runtime = self.runtime
        ticket = runtime.ticket(exchange)
        header = exchange.header
        managers = runtime.managers
        tenants = managers.tenant_level(ticket.tenant)
        applies = (
            managers.produce.quota_applies(ticket.user, ticket.client_id)
            or runtime.topic_quota.total_threshold is not None
            or (tenants is not None and tenants.produce.quota_applies(ticket.tenant, ""))
        )
        if refuse_unmodelled(exchange, applies) or header.body_offset < 0:
            return  # closed, or a version newer than the gateway knows, unbounded: forwarded
        ticket.topics = exchange.produce_topics()
        ticket.acks = exchange.acks
        charging = ticket.charging(header.api_key, header.api_version)
        facts = ticket.facts(charging, header.api_key, header.api_version)
        ticket.admission = admit(runtime.managers, facts)
        refused = self._check_thresholds(ticket, exchange)
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
            runtime.response_throttle.finish(exchange, ticket)

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

    # -- thresholds ------------------------------------------------------------------------

    def _check_thresholds(self, ticket: QuotaTicket, exchange: Exchange) -> set[str]:
        quota = self.runtime.topic_quota
        now = ticket.now_ms
        if quota.total_threshold is None:
            for topic, size in ticket.topics:
                quota.record_accepted(topic, size, now)
            return set()
        refused: set[str] = set()
        throttle_mode = self.runtime.topic_throttle_mode
        for topic, size in ticket.topics:
            refusal = quota.check(topic, now)
            if refusal is None:
                quota.record_accepted(topic, size, now)
                continue
            if throttle_mode:
                # Throttled until the rates have decayed enough to admit the topic again.
                wait = quota.throttle_ms(topic, now)
            else:
                # Refused: retrying before the meters tick again cannot succeed, and a longer
                # mute would also hold back the connection's other topics, which must flow.
                wait = _next_tick_ms(quota, topic, now)
            ticket.topic_bytes_in_ms = max(ticket.topic_bytes_in_ms, wait)
            if throttle_mode:
                quota.record_accepted(topic, size, now)
                quota.record_throttled(size, now)
            else:
                quota.record_error(size, now)
                refused.add(topic)
                self.runtime.topic_refusals += 1
            self._log_refusal(str(refusal), topic, now, exchange, throttle_mode)
        return refused

    def _log_refusal(
        self, reason: str, topic: str, now: int, exchange: Exchange, throttled: bool
    ) -> None:
        # Every refusal is counted; the log line is written at most once a second per topic
        # with the number of refusals since the last one, so a hot topic cannot flood the log.
        last_ms, count = self._refusal_log.get(topic, (0, 0))
        count += 1
        if now - last_ms < _REFUSAL_LOG_INTERVAL_MS:
            self._refusal_log[topic] = (last_ms, count)
            return
        self._refusal_log[topic] = (now, 0)
        log.info(
            kv(
                "topic_bytes_in_throttled" if throttled else "topic_bytes_in_refused",
                reason=reason,
                refusals=count,
                client=exchange.header.client_id,
                principal=exchange.principal,
            )
        )

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


def _next_tick_ms(quota: TopicBytesInQuota, topic: str, now: int) -> int:
    meters = [quota.total_meter, quota.topic_meters.get(topic)]
    return max(min(m.ticked_by_ms(1) - now for m in meters if m is not None), 1)


def _topic_name(topic: Any) -> str:
    name = getattr(topic, "name", None)
    return str(name) if name is not None else str(topic.topic_id)
