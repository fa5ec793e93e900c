"""Bytes-in thresholds through IncrementalAlterConfigs, kept from the upstream.

``bytes.in.per.sec.threshold`` on a topic resource and ``total.bytes.in.per.sec.threshold``
on a broker resource (any name; the gateway has one total) are the gateway's own configs: it
takes them out of the request before anything reaches the upstream, applies and stores them
(SET sets, DELETE removes; APPEND/SUBTRACT are INVALID_CONFIG), and answers for them. A
resource with other configs too is forwarded without the threshold, only if the threshold
part succeeded, so one resource's change stays all-or-nothing. Only super users may change
thresholds.

The broker resource also carries the tenant settings (issue 25), the way ``kafka-configs
--entity-type brokers --entity-default --alter --add-config`` sends them:
``tenant.mapping.rules`` (SET validates the rules first, DELETE goes back to the config
file's) and ``quota.exempt.principals`` (a list: SET, DELETE, and APPEND/SUBTRACT add or
remove principals, as for Kafka's list configs).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.store_sync import QuotaStoreSync
from quotagate.enforcement.ticket import QuotaTicket
from quotagate.gateway import Exchange, Stage, StateKey, modelled_request
from quotagate.protocol import api_table
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota.principal_list import parse_principal_list
from quotagate.quota.topic_bytes_in import TOPIC_THRESHOLD_KEY, TOTAL_THRESHOLD_KEY, ThresholdError
from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper
from quotagate.store.quotas import EXEMPT_PRINCIPALS_SETTING, TENANT_MAPPING_RULES_SETTING

INCREMENTAL_ALTER_CONFIGS: Final = 44
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_TENANCY_KEYS: Final = frozenset({TENANT_MAPPING_RULES_SETTING, EXEMPT_PRINCIPALS_SETTING})
_LOCAL_KEY: Final = StateKey[list[Any]]("thresholds.local")
_ORDER_KEY: Final = StateKey[list[Any]]("thresholds.order")


class TopicThresholdsApiStage(Stage):
    name: ClassVar[str] = "topic-thresholds-api"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({INCREMENTAL_ALTER_CONFIGS})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({INCREMENTAL_ALTER_CONFIGS})

    def __init__(self, ticket: Callable[[Exchange], QuotaTicket], store: QuotaStoreSync) -> None:
        self._ticket = ticket
        self._store = store

    def on_request(self, exchange: Exchange) -> None:
        request = modelled_request(exchange)
        if request is None:
            return  # not modelled: forwarded untouched; malformed: closed
        forwarded: list[Any] = []
        local: list[tuple[Any, int, str | None]] = []
        for resource in request.resources:
            our_keys = _our_keys(int(resource.resource_type))
            ours = [c for c in resource.configs if c.name in our_keys]
            if not ours:
                forwarded.append(resource)
                continue
            code, message = self._apply(exchange, resource, ours, bool(request.validate_only))
            rest = [c for c in resource.configs if c not in ours]
            if code or not rest:
                local.append((resource, code, message))
            else:
                forwarded.append(dataclasses.replace(resource, configs=tuple(rest)))
        if (
            not local
            and all(f is r for f, r in zip(forwarded, request.resources, strict=False))
            and len(forwarded) == len(request.resources)
        ):
            return  # nothing of ours: forward untouched
        errors = [code for _, code, _ in local if code]
        if errors:
            self._ticket(exchange).impose_error(errors[0])
        if not forwarded:
            schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
            exchange.respond(
                build(
                    schema,
                    throttle_time=datetime.timedelta(0),
                    responses=tuple(self._result(exchange, *entry) for entry in local),
                )
            )
            return
        exchange.put(_LOCAL_KEY, local)
        exchange.put(_ORDER_KEY, [_key(r) for r in request.resources])
        exchange.replace_request(dataclasses.replace(request, resources=tuple(forwarded)))

    def on_response(self, exchange: Exchange) -> None:
        local = exchange.get(_LOCAL_KEY)
        if not local or exchange.response_frame is None:
            return
        response = exchange.response_body()
        order = exchange.get(_ORDER_KEY) or []
        rank = {key: i for i, key in enumerate(order)}
        merged = sorted(
            [*response.responses, *(self._result(exchange, *entry) for entry in local)],
            key=lambda r: rank.get(_key(r), len(rank)),
        )
        exchange.replace_response(dataclasses.replace(response, responses=tuple(merged)))

    def _apply(
        self, exchange: Exchange, resource: Any, ours: list[Any], validate_only: bool
    ) -> tuple[int, str | None]:
        topic_resource = int(resource.resource_type) == TOPIC_RESOURCE
        if not self._store.may_alter(exchange.principal, "IncrementalAlterConfigs"):
            if topic_resource:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        tenancy = [c for c in ours if c.name in _TENANCY_KEYS]
        thresholds = [c for c in ours if c.name not in _TENANCY_KEYS]
        try:
            rules, exempt = self._plan_tenancy(tenancy)
        except ValueError as error:
            return ErrorCode.INVALID_CONFIG, str(error)
        if thresholds:
            code, message = self._apply_threshold(exchange, resource, thresholds, validate_only)
            if code:
                return code, message
        if not validate_only:
            principal = exchange.principal or ""
            if rules is not _UNCHANGED:
                self._store.set_tenant_rules(rules, principal)
            if exempt is not _UNCHANGED:
                self._store.set_exempt_principals(exempt, principal)
        return 0, None

    def _plan_tenancy(self, configs: list[Any]) -> tuple[Any, Any]:
        """The new rules and exempt list (``_UNCHANGED`` when not named; None: deleted),
        validated; raises ``ValueError`` with the message for INVALID_CONFIG."""
        rules: Any = _UNCHANGED
        exempt: Any = _UNCHANGED
        for config in configs:
            operation = int(config.config_operation)
            value = config.value
            if config.name == TENANT_MAPPING_RULES_SETTING:
                if operation == _DELETE:
                    rules = None
                elif operation == _SET:
                    try:
                        TenantMapper.from_rules(value or "")
                    except InvalidRuleError as error:
                        raise ValueError(f"{config.name}: {error}") from None
                    rules = value or ""
                else:
                    raise ValueError(f"{config.name} only supports SET and DELETE")
                continue
            current = list(self._store.exempt_principals) if exempt is _UNCHANGED else exempt
            named = parse_principal_list(value or "")
            if operation == _SET:
                exempt = named
            elif operation == _DELETE:
                exempt = None
            elif operation == _APPEND:
                exempt = (current or []) + [p for p in named if p not in (current or [])]
            elif operation == _SUBTRACT:
                exempt = [p for p in current or [] if p not in named]
            else:
                raise ValueError(f"{config.name}: unknown operation {operation}")
        return rules, exempt

    def _apply_threshold(
        self, exchange: Exchange, resource: Any, ours: list[Any], validate_only: bool
    ) -> tuple[int, str | None]:
        topic_resource = int(resource.resource_type) == TOPIC_RESOURCE
        config = ours[-1]
        operation = int(config.config_operation)
        value: float | None
        if operation == _DELETE:
            value = None
        elif operation == _SET:
            try:
                value = float(config.value) if config.value is not None else math.nan
            except ValueError:
                value = math.nan
            if math.isnan(value) or value <= 0:
                return ErrorCode.INVALID_CONFIG, f"{config.name} must be a number > 0"
        else:
            return ErrorCode.INVALID_CONFIG, f"{config.name} only supports SET and DELETE"
        quota = self._store.topic_quota
        try:
            if topic_resource:
                if validate_only:
                    _check_topic(quota.total_threshold, quota.explicit_thresholds,
                                 str(resource.resource_name), value)  # fmt: skip
                else:
                    self._store.set_topic_threshold(
                        str(resource.resource_name), value, exchange.principal or ""
                    )
            elif validate_only:
                _check_total(quota.explicit_thresholds, value)
            else:
                self._store.set_total_threshold(value, exchange.principal or "")
        except ThresholdError as error:
            return ErrorCode.INVALID_CONFIG, str(error)
        return 0, None

    def _result(self, exchange: Exchange, resource: Any, code: int, message: str | None) -> Any:
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        return build(
            nested(schema, "AlterConfigsResourceResponse"),
            error_code=KioErrorCode(code),
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )


_UNCHANGED: Final = object()
_TOPIC_KEYS: Final = frozenset({TOPIC_THRESHOLD_KEY})
_BROKER_KEYS: Final = frozenset({TOTAL_THRESHOLD_KEY}) | _TENANCY_KEYS


def _our_keys(resource_type: int) -> frozenset[str]:
    if resource_type == TOPIC_RESOURCE:
        return _TOPIC_KEYS
    if resource_type == BROKER_RESOURCE:
        return _BROKER_KEYS
    return frozenset()


def _key(resource: Any) -> tuple[int, str]:
    return int(resource.resource_type), str(resource.resource_name)


def _check_topic(
    total: float | None, explicit: dict[str, float], topic: str, value: float | None
) -> None:
    if value is None or total is None:
        return
    others = sum(v for t, v in explicit.items() if t != topic)
    if others + value > total:
        raise ThresholdError(
            f"{TOPIC_THRESHOLD_KEY}={value:g} for {topic!r} would make the per-topic "
            f"thresholds sum to {others + value:g}, above {TOTAL_THRESHOLD_KEY}={total:g}"
        )


def _check_total(explicit: dict[str, float], value: float | None) -> None:
    if value is not None and sum(explicit.values()) > value:
        raise ThresholdError(
            f"{TOTAL_THRESHOLD_KEY}={value:g} is below the sum of the per-topic thresholds"
        )
