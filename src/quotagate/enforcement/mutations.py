"""CreateTopics, DeleteTopics, CreatePartitions: the ``controller_mutation_rate`` quota (KIP-599).

Partition mutations are counted per topic as spec §5.3 says: a CreateTopics topic creates its
manual assignments, else ``num_partitions`` with −1 meaning the upstream's ``num.partitions``
(learned, or ``[quotas] num.partitions``); a CreatePartitions topic adds ``count − current``;
a DeleteTopics topic removes its current partitions (0 while the gateway has not seen the
topic). Topics are admitted one by one in request order against a strict quota (CreateTopics
v6+, DeleteTopics v5+, CreatePartitions v3+) or a permissive one (older versions); the
rejected ones are answered by the gateway with THROTTLING_QUOTA_EXCEEDED (89) and its message,
the admitted ones are forwarded, and the two halves are merged into one response in request
order. ``validate_only`` requests are exempt (the ZooKeeper-mode rule of the KIP; KRaft Kafka
charges them). An API the upstream lacks (tansu has no CreatePartitions) is answered here
with UNSUPPORTED_VERSION for every topic and never forwarded.

CreateTopics v0-1 and DeleteTopics v0 (removed in Kafka 4.0, not modelled by kio) are read
by hand and metered like the others when a mutation quota applies to the client; they are
permissive versions, so nothing needs cutting out. Without an applying quota they are
forwarded untouched.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.ticket import QuotaTicket
from quotagate.enforcement.upstream_facts import UpstreamFacts
from quotagate.gateway import Exchange, Stage, StateKey, modelled_request, refuse_unmodelled
from quotagate.protocol import api_keys, api_table, removed_versions
from quotagate.protocol.codec import CodecError
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota import THROTTLING_QUOTA_EXCEEDED_MESSAGE, QuotaManagers, admit
from quotagate.quota.request_rules import MUTATION_APIS

_REJECTED_KEY: Final = StateKey[list[tuple[Any, int, str]]]("mutation.rejected")
_ORDER_KEY: Final = StateKey[list[Any]]("mutation.order")
_COUNTS_KEY: Final = StateKey[dict[Any, int]]("mutation.counts")
_REMOVED_KEY: Final = StateKey[bool]("mutation.removed_version")
UNSUPPORTED_MESSAGE: Final = "The upstream cluster does not support this API"


@dataclasses.dataclass(frozen=True, slots=True)
class _Api:
    items_field: str
    results_field: str
    result_class: str


_APIS: Final = {
    api_keys.CREATE_TOPICS: _Api("topics", "topics", "CreatableTopicResult"),
    api_keys.DELETE_TOPICS: _Api("topic_names", "responses", "DeletableTopicResult"),
    api_keys.CREATE_PARTITIONS: _Api("topics", "results", "CreatePartitionsTopicResult"),
}


class ControllerMutationStage(Stage):
    name: ClassVar[str] = "controller-mutation-quota"
    request_keys: ClassVar[frozenset[int] | None] = MUTATION_APIS | {api_keys.METADATA}
    response_keys: ClassVar[frozenset[int] | None] = MUTATION_APIS | {api_keys.METADATA}

    def __init__(
        self,
        ticket: Callable[[Exchange], QuotaTicket],
        managers: QuotaManagers,
        upstream: UpstreamFacts,
    ) -> None:
        """``upstream``: what is known of the upstream's topics."""
        self._ticket = ticket
        self._managers = managers
        self._upstream = upstream

    # -- requests ----------------------------------------------------------------------------

    def on_request(self, exchange: Exchange) -> None:
        api_key = exchange.api_key
        if api_key == api_keys.METADATA:
            return
        ticket = self._ticket(exchange)
        applies = self._managers.controller.quota_applies(ticket.user, ticket.client_id)
        tenants = self._managers.tenant_level(ticket.tenant)
        if not applies and tenants is not None:
            applies = tenants.controller.quota_applies(ticket.tenant, "")
        if refuse_unmodelled(exchange, applies):
            return
        removed = api_table.is_removed(api_key, exchange.api_version)
        items: list[Any]
        if removed:
            if not applies:
                return  # nothing to meter for this client: forwarded untouched
            parsed = removed_versions.read_mutation(exchange.request_frame, exchange.header)
            items = list(parsed.topics)
            validate_only = parsed.validate_only
            exchange.put(_REMOVED_KEY, True)
        else:
            request = modelled_request(exchange)
            if request is None:
                return  # a version newer than the gateway knows: forwarded; malformed: closed
            items = list(getattr(request, _items_field(api_key, exchange.api_version)))
            validate_only = bool(getattr(request, "validate_only", False))
        if not self._upstream.supports(api_key):
            if removed:
                return  # no answer of that shape to build: the upstream gives its own
            ticket.impose_error(ErrorCode.UNSUPPORTED_VERSION)
            self._respond(
                exchange,
                [(item, ErrorCode.UNSUPPORTED_VERSION, UNSUPPORTED_MESSAGE) for item in items],
            )
            return
        counts = [self._count(api_key, item) for item in items]
        exchange.put(_COUNTS_KEY, dict(zip(map(_item_key, items), counts, strict=True)))
        # The event records the demand (every counted topic, refused ones too, in request
        # order): that is what a replay under other quotas must charge topic by topic.
        ticket.topics = [
            (_item_key(item), count) for item, count in zip(items, counts, strict=True)
        ]
        if validate_only:
            ticket.validate_only = True  # exempt (ZooKeeper-mode KIP-599); KRaft charges it
            return
        ticket.partition_mutations = sum(count for count in counts if count > 0)
        version = exchange.api_version
        charging = ticket.charging(api_key, version)
        facts = ticket.facts(charging, api_key, version, mutation_counts=counts)
        ticket.admission = admission = admit(self._managers, facts)
        verdicts = admission.admitted
        admitted = [item for item, ok in zip(items, verdicts, strict=True) if ok]
        rejected = [item for item, ok in zip(items, verdicts, strict=True) if not ok]
        if not rejected or removed:
            # The removed versions are all permissive (KIP-599 made v6/v5/v3 strict): every
            # topic is admitted and the client is throttled afterwards.
            return
        ticket.impose_error(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        error = ErrorCode.THROTTLING_QUOTA_EXCEEDED
        local: list[tuple[Any, int, str]] = [
            (item, error, THROTTLING_QUOTA_EXCEEDED_MESSAGE) for item in rejected
        ]
        if not admitted:
            self._respond(exchange, local)
            return
        exchange.put(_REJECTED_KEY, local)
        exchange.put(_ORDER_KEY, [_item_key(item) for item in items])
        field = _items_field(api_key, exchange.api_version)
        exchange.replace_request(
            dataclasses.replace(exchange.request_body(), **{field: tuple(admitted)})
        )

    def _count(self, api_key: int, item: Any) -> int:
        facts = self._upstream
        if api_key == api_keys.CREATE_TOPICS:
            if str(item.name) in facts.partitions:
                # Kafka answers TOPIC_ALREADY_EXISTS before the quota sees the topic, so a
                # client resending a whole request after a throttle is not charged again for
                # what it already created (the upstream gives the same answer here).
                return 0
            if item.assignments:
                return len(item.assignments)
            partitions = int(item.num_partitions)
            return facts.default_partitions if partitions == -1 else max(partitions, 0)
        if api_key == api_keys.CREATE_PARTITIONS:
            # An unknown topic has at least one partition: charge the most it could add.
            current = facts.partitions.get(str(item.name), 1)
            return max(int(item.count) - current, 0)
        name = _item_name(item)
        return facts.partitions.get(name, 0) if name is not None else 0

    # -- responses ---------------------------------------------------------------------------

    def on_response(self, exchange: Exchange) -> None:
        if exchange.response_frame is None:
            return
        api_key = exchange.api_key
        facts = self._upstream
        if exchange.get(_REMOVED_KEY):
            results = removed_versions.read_mutation_results(
                exchange.response_frame, api_key, exchange.api_version
            )
            self._learn(api_key, list(results), exchange.get(_COUNTS_KEY) or {})
            return
        try:
            response = exchange.response_body()
        except CodecError as exc:
            if exchange.get(_REJECTED_KEY):
                # The refused topics' answers cannot be merged in; the client would wait
                # for them until its request timed out.
                exchange.close(f"cannot merge {api_table.api_name(api_key)} response: {exc}")
            return
        if api_key == api_keys.METADATA:
            facts.learn_metadata(response)
            return
        results = list(getattr(response, _APIS[api_key].results_field))
        self._learn(api_key, results, exchange.get(_COUNTS_KEY) or {})
        rejected = exchange.get(_REJECTED_KEY)
        if not rejected:
            return
        merged = _in_request_order(
            results + [self._result(exchange, *entry) for entry in rejected],
            exchange.get(_ORDER_KEY) or [],
        )
        exchange.replace_response(
            dataclasses.replace(response, **{_APIS[api_key].results_field: tuple(merged)})
        )

    def _learn(self, api_key: int, results: list[Any], counts: dict[Any, int]) -> None:
        facts = self._upstream
        for result in results:
            if int(result.error_code) != 0:
                continue
            name = getattr(result, "name", None)
            if name is None:
                continue
            topic = str(name)
            if api_key == api_keys.DELETE_TOPICS:
                facts.set_partitions(topic, None)
            elif api_key == api_keys.CREATE_TOPICS:
                created = int(getattr(result, "num_partitions", -1))
                facts.set_partitions(topic, created if created > 0 else counts.get(topic, 1))
            else:
                facts.set_partitions(topic, facts.partitions.get(topic, 1) + counts.get(topic, 0))

    # -- local answers -----------------------------------------------------------------------

    def _respond(self, exchange: Exchange, entries: Sequence[tuple[Any, int, str]]) -> None:
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        results = tuple(self._result(exchange, *entry) for entry in entries)
        exchange.respond(
            build(schema, throttle_time=_ZERO, **{_APIS[exchange.api_key].results_field: results})
        )

    def _result(self, exchange: Exchange, item: Any, code: int, message: str) -> Any:
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        cls = nested(schema, _APIS[exchange.api_key].result_class)
        return build(
            cls,
            name=_item_name(item),
            topic_id=getattr(item, "topic_id", None),
            error_code=KioErrorCode(code),
            error_message=message,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )


_ZERO: Final = datetime.timedelta(0)


def _items_field(api_key: int, api_version: int) -> str:
    if api_key == api_keys.DELETE_TOPICS and api_version >= 6:
        return "topics"  # v6 names topics by name or id
    return _APIS[api_key].items_field


def _item_name(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    name = getattr(item, "name", None)
    return None if name is None else str(name)


def _item_key(item: Any) -> Any:
    return _item_name(item) or str(getattr(item, "topic_id", ""))


def _in_request_order(results: list[Any], order: list[Any]) -> list[Any]:
    rank: dict[Any, int] = {key: i for i, key in enumerate(order)}
    return sorted(results, key=lambda result: rank.get(_item_key(result), len(rank)))
