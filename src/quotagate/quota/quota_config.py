"""The client-quota configuration model of KIP-546 and its validation (spec §8.3).

Entities are maps from entity type (``user``, ``client-id``, ``ip``) to a name, where
``None`` names the default entity. Errors carry the Kafka error code the admin APIs
answer with, so the gateway can return them verbatim.

Two entity types are not Kafka's: Redpanda's ``client-id-prefix`` (alone or with a
``user``; always named: a default prefix would be the default client id) and quotagate's
``tenant`` (alone; ``<default>`` is the default tenant quota). docs/quotas.md, "Tenants".
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from quotagate.quota.entity import DEFAULT, ClientIdPrefix, EntityName
from quotagate.quota.java import (
    INT_MAX,
    LONG_MAX,
    java_hash_map_order,
    java_map_items,
    java_map_text,
    java_string_hash,
)
from quotagate.quota.shadow_keys import live_key

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
CLIENT_ID_PREFIX: Final = "client-id-prefix"
TENANT: Final = "tenant"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP, CLIENT_ID_PREFIX, TENANT)

INVALID_REQUEST: Final = 42
UNSUPPORTED_VERSION: Final = 35

Entity: TypeAlias = Mapping[str, str | None]


class ConfigType(enum.Enum):
    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


@dataclass(frozen=True, slots=True)
class QuotaKey:
    name: str
    type: ConfigType
    entity_kind: str  # "client" for user/client-id entities, "ip" for ip entities
    doc: str


QUOTA_KEYS: Final = {
    key.name: key
    for key in (
        QuotaKey("producer_byte_rate", ConfigType.LONG, "client", "Produce bytes per second"),
        QuotaKey("consumer_byte_rate", ConfigType.LONG, "client", "Fetch bytes per second"),
        QuotaKey(
            "request_percentage",
            ConfigType.DOUBLE,
            "client",
            "Percent of one thread's time per quota window",
        ),
        QuotaKey(
            "controller_mutation_rate",
            ConfigType.DOUBLE,
            "client",
            "Partition mutations per second (token bucket)",
        ),
        QuotaKey(
            "connection_creation_rate",
            ConfigType.INT,
            "ip",
            "New connections per second from one IP",
        ),
    )
}
CLIENT_QUOTA_KEYS: Final = frozenset(k for k, v in QUOTA_KEYS.items() if v.entity_kind == "client")
IP_QUOTA_KEYS: Final = frozenset(k for k, v in QUOTA_KEYS.items() if v.entity_kind == "ip")


class QuotaConfigError(ValueError):
    def __init__(self, message: str, error_code: int = INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error_code = error_code


def validate_entity(entity: Iterable[tuple[str, str | None]]) -> dict[str, str | None]:
    """Check an entity given as (type, name) pairs, in KRaft's order and with its messages
    (ClientQuotaControlManager); returns it as a map."""
    result: dict[str, str | None] = {}
    for entity_type, name in entity:
        if entity_type in result:
            raise QuotaConfigError(
                f"Invalid client quota entity, duplicate entity entry {entity_type}"
            )
        if entity_type not in ENTITY_TYPES:
            raise QuotaConfigError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise QuotaConfigError(f"Empty {entity_type} not supported")
        result[entity_type] = name
    if not result:
        raise QuotaConfigError("Invalid empty client quota entity")
    if IP in result and len(result) > 1:
        # KRaft's text, missing space included: clients show it and tools match it.
        raise QuotaConfigError(
            "Invalid quota entity combination, IP entity shouldnot be combined with "
            "User or ClientId"
        )
    _check_extension_types(result)
    ip = result.get(IP)
    if ip is not None:
        # Kafka also accepts a host name it can resolve; the gateway does no DNS
        # (docs/engine.md), so only an address passes, with Kafka's message otherwise.
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise QuotaConfigError(f"{ip} is not a valid IP or resolvable host.") from None
    return result


def _check_extension_types(entity: Mapping[str, str | None]) -> None:
    """The combinations of the types that are not Kafka's (KRaft refuses them as unknown)."""
    if CLIENT_ID_PREFIX in entity:
        if entity[CLIENT_ID_PREFIX] is None:
            raise QuotaConfigError(
                "A client-id-prefix entity needs a prefix; the default client id is "
                "--entity-type clients --entity-default"
            )
        if set(entity) - {USER, CLIENT_ID_PREFIX}:
            raise QuotaConfigError(
                "Invalid quota entity combination, client-id-prefix can only be combined with user"
            )
    if TENANT in entity and len(entity) > 1:
        raise QuotaConfigError(
            "Invalid quota entity combination, tenant cannot be combined with other entity types"
        )


def validate_value(entity: Entity, key: str, value: float) -> None:
    """Check one quota value for an entity, with KRaft's messages."""
    allowed = IP_QUOTA_KEYS if IP in entity else CLIENT_QUOTA_KEYS
    # A shadow key is checked as the key it stands for; ip quotas have no shadow.
    base = live_key(key) if key else key  # Kafka answers a null key too
    quota_key = QUOTA_KEYS.get(base)
    if quota_key is None or base not in allowed or (base != key and IP in entity):
        raise QuotaConfigError(f"Invalid configuration key {key}")
    if math.isnan(value) or value <= 0:
        raise QuotaConfigError(f"Quota {key} must be greater than 0")
    # Java compares the double with the bound promoted to double: Long.MAX_VALUE becomes 2^63,
    # so 9223372036854775807 (Kafka's "unlimited", 2^63 as a double) is accepted.
    if quota_key.type is ConfigType.LONG and value > float(LONG_MAX):
        raise QuotaConfigError(f"Proposed value for {key} is too large for a LONG.")
    if quota_key.type is ConfigType.INT and value > float(INT_MAX):
        raise QuotaConfigError(f"Proposed value for {key} is too large for an INT.")
    if quota_key.type is not ConfigType.DOUBLE and abs(math.fmod(value, 1.0)) > 1e-6:
        raise QuotaConfigError(f"{key} cannot be a fractional value.")


def validate_alteration(
    entity: Iterable[tuple[str, str | None]],
    ops: Iterable[tuple[str, float | None]],
) -> tuple[dict[str, str | None], dict[str, float | None]]:
    """Validate one AlterClientQuotas entry: ``ops`` are (key, value) with None = remove.

    As KRaft: a key given twice fails the entity (its final message is "Ignoring duplicate
    entity", which overwrites the duplicate-key one there); a removal is never validated (a
    key not set, or not valid for the entity, is simply not removed: NONE). Kafka reads the
    entity and the ops into HashMaps first, so a type given twice keeps its last name, and it
    checks both in HashMap order: with two faults, the one Kafka names is named.
    """
    pairs = list(entity)
    op_list = list(ops)
    keys = [key for key, _ in op_list]
    if len(set(keys)) != len(keys):
        raise QuotaConfigError(duplicate_entity_message(pairs))
    valid_entity = validate_entity(java_map_items(pairs, len(pairs)))
    changes: dict[str, float | None] = {}
    for key, value in java_map_items(op_list, len(op_list)):
        if value is not None:
            validate_value(valid_entity, key, value)
        changes[key] = value
    return valid_entity, changes


def duplicate_entity_message(entity: Iterable[tuple[str, str | None]]) -> str:
    """KRaft's answer to an entity altered twice in one request (or with a key twice)."""
    pairs = list(entity)
    return (
        f"Ignoring duplicate entity ClientQuotaEntity(entries={java_map_text(pairs, len(pairs))})"
    )


@dataclass(frozen=True, slots=True)
class EntityOutcome:
    """KRaft's answer for one entity of an AlterClientQuotas request."""

    entity: list[tuple[str, str | None]]
    """As Kafka echoes it: its map of types to names, in HashMap order."""
    error_code: int = 0
    error_message: str | None = None


QuotaChange: TypeAlias = tuple[dict[str, str | None], str, float | None]
"""(entity, key, value): set ``key`` of ``entity`` to ``value``, or remove it when None."""


def alter_client_quotas(
    entries: Iterable[tuple[Iterable[tuple[str, str | None]], Iterable[tuple[str, float | None]]]],
) -> tuple[list[EntityOutcome], list[QuotaChange]]:
    """A whole AlterClientQuotas request as KRaft's controller decides it: one outcome per
    distinct entity, listed in the order Kafka's response lists them, and the changes to apply.

    As ClientQuotaControlManager: an entity given again in the same request is answered
    "Ignoring duplicate entity", which replaces its first answer while the first alteration's
    changes still apply; an entity fails whole, so none of its changes apply. Whether a change
    writes anything (a value set to what it is, a removal of a key not set) is the store's call.
    """
    outcomes: dict[tuple[tuple[str, str | None], ...], EntityOutcome] = {}
    changes: list[QuotaChange] = []
    for entity, ops in entries:
        pairs = list(entity)
        shown = java_map_items(pairs, len(pairs))
        key = entity_key(dict(pairs))
        if key in outcomes:
            outcome = outcomes[key]
            message = duplicate_entity_message(pairs)
            outcomes[key] = EntityOutcome(outcome.entity, INVALID_REQUEST, message)
            continue
        try:
            valid_entity, entity_changes = validate_alteration(pairs, ops)
        except QuotaConfigError as error:
            outcomes[key] = EntityOutcome(shown, error.error_code, str(error))
            continue
        outcomes[key] = EntityOutcome(shown)
        changes.extend((valid_entity, k, v) for k, v in entity_changes.items())
    answered = list(outcomes.values())
    order = java_hash_map_order([_entity_hash(outcome.entity) for outcome in answered])
    return [answered[i] for i in order], changes


def _entity_hash(entity: Iterable[tuple[str, str | None]]) -> int:
    """``ClientQuotaEntity.hashCode()``: ``Objects.hash`` of its map, whose hash sums
    ``key.hashCode() ^ value.hashCode()`` over the entries (null hashes to 0)."""
    total = 0
    for entity_type, name in entity:
        total += _null_safe_hash(entity_type) ^ _null_safe_hash(name)
    return (31 + total) & 0xFFFFFFFF


def _null_safe_hash(text: str | None) -> int:
    return 0 if text is None else java_string_hash(text)


def entity_key(entity: Entity) -> tuple[tuple[str, str | None], ...]:
    """A hashable, order-independent form of an entity."""
    return tuple(sorted(entity.items(), key=lambda item: item[0]))


def manager_entity(entity: Entity) -> tuple[EntityName, EntityName]:
    """The (user, client_id) pair a quota manager takes for a user/client-id entity (the
    client part a :class:`ClientIdPrefix` for a ``client-id-prefix`` one)."""
    prefix = entity.get(CLIENT_ID_PREFIX)

    def part(entity_type: str) -> EntityName:
        if entity_type not in entity:
            return None
        name = entity[entity_type]
        return DEFAULT if name is None else name

    if prefix is not None:
        return part(USER), ClientIdPrefix(prefix)
    return part(USER), part(CLIENT_ID)
