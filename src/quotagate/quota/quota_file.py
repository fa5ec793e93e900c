"""The quota file: what ``quotagate quotas apply FILE`` reads and ``pipeline recommend`` writes.

TOML, one ``[[quota]]`` table per entity. Entity parts are plain keys (``user``,
``client-id``, ``ip``); the default entity of a type is listed in ``defaults``; every other
key is a quota config key::

    [[quota]]
    user = "alice"
    defaults = ["client-id"]          # the entity is (user=alice, client-id=<default>)
    producer_byte_rate = 1048576
    controller_mutation_rate = 5.0

    [gateway]                         # advisory gateway settings, not applied by `apply`
    "controller.quota.window.num" = 11

    [broker]                          # the store-kept settings of the default broker
    "tenant.mapping.rules" = "RULE:client-id:^team-([a-z]+)-.*$/$1/"
    "quota.exempt.principals" = ["User:canary"]

Parsing validates every entity and value exactly as AlterClientQuotas would.

``[broker]`` holds the two settings the live gateway keeps in its store and takes through
IncrementalAlterConfigs on the default broker resource (``kafka-configs --entity-type brokers
--entity-default``), so they are spelled with their Kafka names and not mixed with the
numeric, advisory ``[gateway]``: ``quotas apply`` sends them that way, and the what-if replay
runs with them (an exempt principal is never throttled; the rules, when given, name each
client's tenant instead of the tenant the events recorded). A key left out means "as it is":
``apply`` leaves the live setting alone, the replay uses the recorded tenants and exempts
nobody. ``quota.exempt.principals`` is a list checked by the store's own rule
(:mod:`quotagate.quota.principal_list`); ``tenant.mapping.rules`` is read here as text and
parsed where it is used by the gateway's parser (``security.tenant_mapping``, which the core
does not import): the pipeline's ``parse_quotas`` and ``quotas apply`` check it before
anything runs or is sent.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any, Final

import tomli_w

from quotagate.quota.principal_list import EXEMPT_PRINCIPALS, check_principals
from quotagate.quota.quota_config import (
    ENTITY_TYPES,
    QuotaConfigError,
    validate_entity,
    validate_value,
)

TENANT_MAPPING_RULES: Final = "tenant.mapping.rules"
BROKER_SETTINGS: Final = (TENANT_MAPPING_RULES, EXEMPT_PRINCIPALS)


@dataclass(slots=True)
class QuotaFileEntry:
    entity: dict[str, str | None]
    config: dict[str, float]


@dataclass(slots=True)
class QuotaFile:
    entries: list[QuotaFileEntry] = field(default_factory=list)
    gateway: dict[str, int | float] = field(default_factory=dict)
    tenant_mapping_rules: str | None = None
    """``[broker] "tenant.mapping.rules"``, unparsed; None: not given."""
    exempt_principals: list[str] | None = None
    """``[broker] "quota.exempt.principals"``; None: not given ([] exempts nobody)."""


class QuotaFileError(ValueError):
    pass


def load_quota_file(text: str) -> QuotaFile:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise QuotaFileError(f"not valid TOML: {error}") from None
    unknown = set(document) - {"quota", "gateway", "broker"}
    if unknown:
        raise QuotaFileError(
            f"unknown top-level key(s) {sorted(unknown)}; expected [[quota]] tables, [gateway] "
            "and [broker]"
        )
    quotas = document.get("quota", [])
    if not isinstance(quotas, list):
        raise QuotaFileError("'quota' must be an array of tables: write [[quota]], not [quota]")
    entries = [_entry(index, table) for index, table in enumerate(quotas, start=1)]
    gateway = document.get("gateway", {})
    if not isinstance(gateway, dict) or not all(
        isinstance(v, int | float) for v in gateway.values()
    ):
        raise QuotaFileError("[gateway] must map setting names to numbers")
    rules, exempt = read_broker_table(document.get("broker", {}))
    return QuotaFile(entries, dict(gateway), rules, exempt)


def dump_quota_file(quota_file: QuotaFile) -> str:
    tables: list[dict[str, Any]] = []
    for entry in quota_file.entries:
        table: dict[str, Any] = {}
        defaults = [t for t, name in entry.entity.items() if name is None]
        table.update({t: name for t, name in entry.entity.items() if name is not None})
        if defaults:
            table["defaults"] = defaults
        table.update(entry.config)
        tables.append(table)
    document: dict[str, Any] = {"quota": tables}
    if quota_file.gateway:
        document["gateway"] = dict(quota_file.gateway)
    broker = broker_table(quota_file)
    if broker:
        document["broker"] = broker
    return tomli_w.dumps(document)


def broker_table(quota_file: QuotaFile) -> dict[str, Any]:
    """The file's ``[broker]`` settings that are given, as the file writes them."""
    broker: dict[str, Any] = {}
    if quota_file.tenant_mapping_rules is not None:
        broker[TENANT_MAPPING_RULES] = quota_file.tenant_mapping_rules
    if quota_file.exempt_principals is not None:
        broker[EXEMPT_PRINCIPALS] = list(quota_file.exempt_principals)
    return broker


def read_broker_table(table: object) -> tuple[str | None, list[str] | None]:
    """``[broker]``: the rules' text and the exempt principals (None where not given);
    raises :class:`QuotaFileError` saying what to write."""
    if not isinstance(table, dict):
        raise QuotaFileError(f"[broker] must be a table of {list(BROKER_SETTINGS)}")
    unknown = sorted(set(table) - set(BROKER_SETTINGS))
    if unknown:
        raise QuotaFileError(
            f"[broker]: unknown setting(s) {unknown}; it holds only {list(BROKER_SETTINGS)}"
        )
    rules = table.get(TENANT_MAPPING_RULES)
    if rules is not None and not isinstance(rules, str):
        raise QuotaFileError(
            f'[broker]: "{TENANT_MAPPING_RULES}" must be a string, e.g. '
            f'"{TENANT_MAPPING_RULES}" = "RULE:client-id:^team-([a-z]+)-.*$/$1/"'
        )
    exempt = table.get(EXEMPT_PRINCIPALS)
    if exempt is None:
        return rules, None
    if not isinstance(exempt, list):
        raise QuotaFileError(
            f'[broker]: "{EXEMPT_PRINCIPALS}" must be a list, e.g. '
            f'"{EXEMPT_PRINCIPALS}" = ["User:canary"]'
        )
    try:
        return rules, check_principals(exempt)
    except ValueError as error:
        raise QuotaFileError(f"[broker]: {error}") from None


def _entry(index: int, table: object) -> QuotaFileEntry:
    where = f"[[quota]] #{index}"
    if not isinstance(table, dict):
        raise QuotaFileError(f"{where} must be a table")
    defaults = table.get("defaults", [])
    if not isinstance(defaults, list) or not all(isinstance(d, str) for d in defaults):
        raise QuotaFileError(f"{where}: 'defaults' must be a list of entity types")
    pairs: list[tuple[str, str | None]] = [(t, None) for t in defaults]
    config: dict[str, float] = {}
    for key, value in table.items():
        if key == "defaults":
            continue
        if key in ENTITY_TYPES:
            if not isinstance(value, str):
                raise QuotaFileError(f"{where}: {key} must be a string name")
            pairs.append((key, value))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            config[key] = float(value)
        else:
            raise QuotaFileError(f"{where}: {key} = {value!r} is neither an entity nor a number")
    try:
        entity = validate_entity(pairs)
        for key, value in config.items():
            validate_value(entity, key, value)
    except QuotaConfigError as error:
        raise QuotaFileError(f"{where}: {error}") from None
    if not config:
        raise QuotaFileError(f"{where}: no quota values given")
    return QuotaFileEntry(entity, config)
