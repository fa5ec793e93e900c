"""DescribeConfigs answers for the configs the gateway keeps itself.

IncrementalAlterConfigs takes the gateway's own configs out of a request and keeps them
(:mod:`quotagate.enforcement.topic_thresholds_api`); the upstream never hears of them, so its
DescribeConfigs answer does not list them either. This stage adds them to that answer, as
Kafka lists a dynamic config: ``bytes.in.per.sec.threshold`` on the topic it is set for
(source TOPIC_CONFIG), and on a broker resource ``total.bytes.in.per.sec.threshold``,
``tenant.mapping.rules`` and ``quota.exempt.principals`` (DYNAMIC_DEFAULT_BROKER_CONFIG when
set through the admin API, STATIC_BROKER_CONFIG when from the config file; the default broker
resource, ``kafka-configs --entity-type brokers --entity-default --describe``, lists only the
dynamic ones, as Kafka's does). A config the request did not ask for is not added.

The default broker resource (name "") is the gateway's alone for these configs: when the
upstream refuses to describe it (a broker that has no dynamic defaults), the gateway answers
for it with its own configs. An authorization failure is the upstream's verdict on the
principal, not on the resource: it stands, and the gateway adds nothing to it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any, ClassVar, Final, NamedTuple

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i8

from quotagate.enforcement.store_sync import QuotaStoreSync
from quotagate.gateway import Exchange, Stage, StateKey, modelled_request
from quotagate.protocol import api_table
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota.principal_list import principal_list_text
from quotagate.quota.topic_bytes_in import TOPIC_THRESHOLD_KEY, TOTAL_THRESHOLD_KEY
from quotagate.store.quotas import EXEMPT_PRINCIPALS_SETTING, TENANT_MAPPING_RULES_SETTING

DESCRIBE_CONFIGS: Final = 32
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
DEFAULT_BROKER: Final = ""

# Kafka's DescribeConfigsResponse ConfigSource and ConfigType values.
TOPIC_CONFIG: Final = 1
DYNAMIC_DEFAULT_BROKER_CONFIG: Final = 3
STATIC_BROKER_CONFIG: Final = 4
STRING: Final = 2
DOUBLE: Final = 6
LIST: Final = 7

_DOCUMENTATION: Final = {
    TOPIC_THRESHOLD_KEY: "Produce bytes per second above which the gateway refuses or "
    "throttles writes to this topic.",
    TOTAL_THRESHOLD_KEY: "Produce bytes per second, over all topics, above which the gateway "
    "refuses or throttles writes to the hottest topics.",
    TENANT_MAPPING_RULES_SETTING: "RULE:user:PATTERN/REPLACEMENT/ and "
    "RULE:client-id:PATTERN/REPLACEMENT/ rules naming the tenant of a client; first match wins.",
    EXEMPT_PRINCIPALS_SETTING: "Principals metered but never throttled nor refused by a quota.",
}

_OWN_KEYS: Final = frozenset(_DOCUMENTATION)
_DEFAULT_BROKER: Final = (BROKER_RESOURCE, DEFAULT_BROKER)
_AUTHORIZATION_FAILURES: Final = frozenset(
    {KioErrorCode.cluster_authorization_failed, KioErrorCode.topic_authorization_failed}
)


class _Asked(NamedTuple):
    order: list[tuple[int, str]]
    """Every resource of the request, in its order."""
    keys: dict[tuple[int, str], tuple[str, ...] | None]
    """The topic and broker resources, and the config keys asked of each (None: all)."""
    documented: bool


_ASKED: Final = StateKey[_Asked]("own_configs.asked")


class OwnConfig(NamedTuple):
    name: str
    value: str
    source: int
    config_type: int


class OwnConfigsApiStage(Stage):
    name: ClassVar[str] = "own-configs-api"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({DESCRIBE_CONFIGS})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({DESCRIBE_CONFIGS})

    def __init__(self, store: QuotaStoreSync) -> None:
        self._store = store

    def on_request(self, exchange: Exchange) -> None:
        request = modelled_request(exchange)
        if request is None:
            return
        asked = _Asked([], {}, bool(getattr(request, "include_documentation", False)))
        forwarded = []
        for resource in request.resources:
            kind, name, keys = (
                int(resource.resource_type),
                str(resource.resource_name),
                resource.configuration_keys,
            )
            asked.order.append((kind, name))
            if kind not in (TOPIC_RESOURCE, BROKER_RESOURCE):
                forwarded.append(resource)
                continue
            asked.keys[kind, name] = keys
            if not keys:
                forwarded.append(resource)
                continue
            # The upstream knows nothing of our keys: it is asked only for its own, and a
            # resource that names only ours is answered here.
            theirs = tuple(k for k in keys if k not in _OWN_KEYS)
            if theirs:
                forwarded.append(dataclasses.replace(resource, configuration_keys=theirs))
        if not asked.keys:
            return
        exchange.put(_ASKED, asked)
        if len(forwarded) == len(request.resources) and all(
            f is r for f, r in zip(forwarded, request.resources, strict=True)
        ):
            return
        if forwarded:
            exchange.replace_request(dataclasses.replace(request, resources=tuple(forwarded)))
            return
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        empty = build(schema, throttle_time=datetime.timedelta(0), results=())
        exchange.respond(self._merged(asked, empty, schema))

    def on_response(self, exchange: Exchange) -> None:
        asked = exchange.get(_ASKED)
        if asked is None or exchange.response_frame is None:
            return
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        exchange.replace_response(self._merged(asked, exchange.response_body(), schema))

    def _merged(self, asked: _Asked, response: Any, schema: Any) -> Any:
        """``response`` with the gateway's configs added: one result per resource of the
        request, in its order."""
        upstream = {(int(r.resource_type), str(r.resource_name)): r for r in response.results}
        results = []
        for key in asked.order:
            result = upstream.get(key)
            if key not in asked.keys:
                if result is not None:
                    results.append(result)
                continue
            ours = _asked(own_configs(self._store, *key), asked.keys[key])
            if result is None:
                result = _empty_result(schema, *key)
            if ours and _answerable(result.error_code, key):
                result = _with_ours(result, ours, schema, asked.documented)
            results.append(result)
        return dataclasses.replace(response, results=tuple(results))


def _answerable(error: KioErrorCode, key: tuple[int, str]) -> bool:
    """Whether the gateway's configs go into a result with this upstream error."""
    if error == KioErrorCode.none:
        return True
    return key == _DEFAULT_BROKER and error not in _AUTHORIZATION_FAILURES


def own_configs(store: QuotaStoreSync, resource_type: int, name: str) -> list[OwnConfig]:
    """The gateway's own configs of one resource, as DescribeConfigs lists them."""
    if resource_type == TOPIC_RESOURCE:
        threshold = store.topic_quota.explicit_thresholds.get(name)
        if threshold is None:
            return []
        return [OwnConfig(TOPIC_THRESHOLD_KEY, f"{threshold:g}", TOPIC_CONFIG, DOUBLE)]
    configs: list[OwnConfig] = []
    total = store.topic_quota.total_threshold
    if total is not None:
        stored = store.store is not None and store.store.total_threshold() is not None
        source = DYNAMIC_DEFAULT_BROKER_CONFIG if stored else STATIC_BROKER_CONFIG
        configs.append(OwnConfig(TOTAL_THRESHOLD_KEY, f"{total:g}", source, DOUBLE))
    rules, rules_dynamic = store.tenant_rules_in_force
    if rules:
        source = DYNAMIC_DEFAULT_BROKER_CONFIG if rules_dynamic else STATIC_BROKER_CONFIG
        configs.append(OwnConfig(TENANT_MAPPING_RULES_SETTING, rules, source, STRING))
    exempt, exempt_dynamic = store.exempt_principals_in_force
    if exempt:
        source = DYNAMIC_DEFAULT_BROKER_CONFIG if exempt_dynamic else STATIC_BROKER_CONFIG
        text = principal_list_text(list(exempt))
        configs.append(OwnConfig(EXEMPT_PRINCIPALS_SETTING, text, source, LIST))
    if name == DEFAULT_BROKER:
        # The default resource holds the cluster-wide dynamic defaults only.
        return [c for c in configs if c.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
    return configs


def _with_ours(result: Any, ours: list[OwnConfig], schema: Any, documented: bool) -> Any:
    """``result`` listing ``ours`` too (in place of the upstream's error, if it had one)."""
    entries = tuple(_entry(schema, config, documented) for config in ours)
    if result.error_code != KioErrorCode.none:
        return dataclasses.replace(
            result, error_code=KioErrorCode.none, error_message=None, configs=entries
        )
    mine = {config.name for config in ours}
    kept = tuple(c for c in result.configs if c.name not in mine)
    return dataclasses.replace(result, configs=kept + entries)


def _empty_result(schema: Any, resource_type: int, name: str) -> Any:
    return build(
        nested(schema, "DescribeConfigsResult"),
        error_code=KioErrorCode.none,
        error_message=None,
        resource_type=i8(resource_type),
        resource_name=name,
        configs=(),
    )


def _asked(configs: list[OwnConfig], keys: Sequence[str] | None) -> list[OwnConfig]:
    # Null or empty keys ask for every config (Kafka reads an empty list as null too).
    return [c for c in configs if not keys or c.name in keys]


def _entry(schema: Any, config: OwnConfig, documented: bool) -> Any:
    return build(
        nested(schema, "DescribeConfigsResourceResult"),
        name=config.name,
        value=config.value,
        read_only=False,
        config_source=i8(config.source),
        is_default=False,
        is_sensitive=False,
        synonyms=(),
        config_type=i8(config.config_type),
        documentation=_DOCUMENTATION.get(config.name) if documented else None,
    )
