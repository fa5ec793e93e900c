"""DescribeClientQuotas and AlterClientQuotas (KIP-546), answered by the gateway itself.

The quotas live in the gateway's store, not in the upstream, so these requests are never
forwarded (the upstream may not even have the APIs: tansu does not). Filters and alterations
are validated exactly as KRaft Kafka does (spec §8.3). Anyone may describe (the gateway has
no ACLs; Kafka with no authorizer behaves the same); only the super users of the config may
alter, others get CLUSTER_AUTHORIZATION_FAILED for every entry. An applied change acts on the
next request, is stored (it survives restarts) and is audited.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.store_sync import QuotaStoreSync
from quotagate.enforcement.ticket import QuotaTicket
from quotagate.gateway import Exchange, Stage
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.codec import CodecError
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota import ClientQuotaFilter, FilterComponent, MatchType, QuotaConfigError
from quotagate.quota.quota_config import alter_client_quotas
from quotagate.store.quotas import Change, entity_key

_ZERO: Final = datetime.timedelta(0)
CLUSTER_AUTHORIZATION_MESSAGE: Final = "Cluster authorization failed."


def _versions(api_key: int) -> range:
    versions = api_table.modelled_versions(api_key)
    return versions if versions is not None else range(0)


class ClientQuotasApiStage(Stage):
    name: ClassVar[str] = "client-quotas-api"
    request_keys: ClassVar[frozenset[int] | None] = frozenset(
        {api_keys.DESCRIBE_CLIENT_QUOTAS, api_keys.ALTER_CLIENT_QUOTAS}
    )
    local_apis: ClassVar[dict[int, range]] = {
        api_keys.DESCRIBE_CLIENT_QUOTAS: _versions(api_keys.DESCRIBE_CLIENT_QUOTAS),
        api_keys.ALTER_CLIENT_QUOTAS: _versions(api_keys.ALTER_CLIENT_QUOTAS),
    }

    def __init__(self, ticket: Callable[[Exchange], QuotaTicket], store: QuotaStoreSync) -> None:
        self._ticket = ticket
        self._store = store

    def on_request(self, exchange: Exchange) -> None:
        try:
            request = exchange.request_body()
        except CodecError as exc:
            exchange.close(f"cannot decode {api_table.api_name(exchange.api_key)}: {exc}")
            return
        if exchange.api_key == api_keys.DESCRIBE_CLIENT_QUOTAS:
            exchange.respond(self._describe(exchange, request))
        else:
            exchange.respond(self._alter(exchange, request))

    # -- describe ----------------------------------------------------------------------------

    def _describe(self, exchange: Exchange, request: Any) -> Any:
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        try:
            components = []
            for component in request.components:
                try:
                    match_type = MatchType(int(component.match_type))
                except ValueError:
                    raise QuotaConfigError(
                        f"Unexpected match type {int(component.match_type)}"
                    ) from None
                components.append(
                    FilterComponent(component.entity_type, match_type, component.match)
                )
            quota_filter = ClientQuotaFilter(tuple(components), bool(request.strict))
            entities = [dict(key) for key in self._store.client_quotas]
            matched = quota_filter.select(entities)
        except QuotaConfigError as error:
            self._ticket(exchange).impose_error(error.error_code)
            return build(
                schema,
                throttle_time=_ZERO,
                error_code=KioErrorCode(error.error_code),
                error_message=str(error),
                entries=None,
            )
        entry_cls = nested(schema, "EntryData")
        entity_cls = nested(schema, "EntityData")
        value_cls = nested(schema, "ValueData")
        entries = []
        for entity in matched:
            values = self._store.client_quotas[entity_key(entity)]
            entries.append(
                build(
                    entry_cls,
                    entity=tuple(
                        build(entity_cls, entity_type=t, entity_name=n)
                        for t, n in entity_key(entity)
                    ),
                    values=tuple(
                        build(value_cls, key=k, value=v) for k, v in sorted(values.items())
                    ),
                )
            )
        return build(
            schema,
            throttle_time=_ZERO,
            error_code=KioErrorCode(0),
            error_message=None,
            entries=tuple(entries),
        )

    # -- alter -------------------------------------------------------------------------------

    def _alter(self, exchange: Exchange, request: Any) -> Any:
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        entry_cls = nested(schema, "EntryData")
        entity_cls = nested(schema, "EntityData")
        results: list[tuple[Any, int, str | None]]
        changes: list[Change] = []
        if not self._store.may_alter(exchange.principal, "AlterClientQuotas"):
            # Refused before the controller sees it: one answer per entry, as sent.
            results = [
                (
                    [(e.entity_type, e.entity_name) for e in entry.entity],
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    CLUSTER_AUTHORIZATION_MESSAGE,
                )
                for entry in request.entries
            ]
            self._ticket(exchange).impose_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        else:
            outcomes, quota_changes = alter_client_quotas(
                (
                    [(e.entity_type, e.entity_name) for e in entry.entity],
                    [(op.key, None if op.remove else float(op.value)) for op in entry.ops],
                )
                for entry in request.entries
            )
            results = [(o.entity, o.error_code, o.error_message) for o in outcomes]
            changes = [Change(entity, key, value) for entity, key, value in quota_changes]
            first_error = next((code for _, code, _ in results if code), 0)
            if first_error:
                self._ticket(exchange).impose_error(first_error)
        if changes and not request.validate_only:
            source = f"AlterClientQuotas from {exchange.connection.client_address}"
            self._store.alter_client_quotas(changes, exchange.principal or "", source)
        return build(
            schema,
            throttle_time=_ZERO,
            entries=tuple(
                build(
                    entry_cls,
                    error_code=KioErrorCode(code),
                    error_message=message,
                    entity=tuple(build(entity_cls, entity_type=t, entity_name=n) for t, n in pairs),
                )
                for pairs, code, message in results
            ),
        )
