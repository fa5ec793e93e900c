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

Parsing validates every entity and value exactly as AlterClientQuotas would.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from quotagate.quota.quota_config import (
    ENTITY_TYPES,
    QuotaConfigError,
    validate_entity,
    validate_value,
)


@dataclass(slots=True)
class QuotaFileEntry:
    entity: dict[str, str | None]
    config: dict[str, float]


@dataclass(slots=True)
class QuotaFile:
    entries: list[QuotaFileEntry] = field(default_factory=list)
    gateway: dict[str, int | float] = field(default_factory=dict)


class QuotaFileError(ValueError):
    pass


def load_quota_file(text: str) -> QuotaFile:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise QuotaFileError(f"not valid TOML: {error}") from None
    unknown = set(document) - {"quota", "gateway"}
    if unknown:
        raise QuotaFileError(
            f"unknown top-level key(s) {sorted(unknown)}; expected [[quota]] tables and [gateway]"
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
    return QuotaFile(entries, dict(gateway))


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
    return tomli_w.dumps(document)


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
