"""Bytes-in thresholds through IncrementalAlterConfigs, kept from the upstream.

``bytes.in.per.sec.threshold`` on a topic resource and ``total.bytes.in.per.sec.threshold``
on a broker resource (any name; the gateway has one total) are the gateway's own configs: it
takes them out of the request before anything reaches the upstream, applies and stores them
(SET sets, DELETE removes; APPEND/SUBTRACT are INVALID_CONFIG), and answers for them. A
resource with other configs too is forwarded without the threshold, only if the threshold
part succeeded, so one resource's change stays all-or-nothing. Only super users may change
thresholds.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.gateway import Exchange, Stage, StateKey, modelled_request
from quotagate.protocol import api_table
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota.topic_bytes_in import TOPIC_THRESHOLD_KEY, TOTAL_THRESHOLD_KEY, ThresholdError

INCREMENTAL_ALTER_CONFIGS: Final = 44
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
_SET, _DELETE = 0, 1
_LOCAL_KEY: Final = StateKey[list[Any]]("thresholds.local")
_ORDER_KEY: Final = StateKey[list[Any]]("thresholds.order")


class TopicThresholdsApiStage(Stage):
    name: ClassVar[str] = "topic-thresholds-api"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({INCREMENTAL_ALTER_CONFIGS})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({INCREMENTAL_ALTER_CONFIGS})

    def __init__(self, runtime: QuotaRuntime) -> None:
        # Only the parts it uses: the request's ticket and the store's thresholds and writes.
        self._ticket = runtime.ticket
        self._store = runtime.store_sync

    def on_request(self, exchange: Exchange) -> None:
        request = modelled_request(exchange)
        if request is None:
            return  # not modelled: forwarded untouched; malformed: closed
        forwarded: list[Any] = []
        local: list[tuple[Any, int, str | None]] = []
        for resource in request.resources:
            ours_key = _our_key(int(resource.resource_type))
            ours = [c for c in resource.configs if ours_key and c.name == ours_key]
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
        if not self._store.is_super_user(exchange.principal):
            if topic_resource:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
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


def _our_key(resource_type: int) -> str | None:
    if resource_type == TOPIC_RESOURCE:
        return TOPIC_THRESHOLD_KEY
    if resource_type == BROKER_RESOURCE:
        return TOTAL_THRESHOLD_KEY
    return None


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
