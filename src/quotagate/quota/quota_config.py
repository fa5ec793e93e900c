"""The client-quota configuration model of KIP-546 and its validation (spec §8.3).

Entities are maps from entity type (``user``, ``client-id``, ``ip``) to a name, where
``None`` names the default entity. Errors carry the Kafka error code the admin APIs
answer with, so the gateway can return them verbatim.
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from quotagate.quota.entity import DEFAULT, EntityName
from quotagate.quota.java import INT_MAX, LONG_MAX, java_map_text

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

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
    ip = result.get(IP)
    if ip is not None:
        # Kafka also accepts a host name it can resolve; the gateway does no DNS
        # (docs/engine.md), so only an address passes, with Kafka's message otherwise.
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise QuotaConfigError(f"{ip} is not a valid IP or resolvable host.") from None
    return result


def validate_value(entity: Entity, key: str, value: float) -> None:
    """Check one quota value for an entity, with KRaft's messages."""
    allowed = IP_QUOTA_KEYS if IP in entity else CLIENT_QUOTA_KEYS
    quota_key = QUOTA_KEYS.get(key)
    if quota_key is None or key not in allowed:
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
    key not set, or not valid for the entity, is simply not removed: NONE).
    """
    pairs = list(entity)
    keys = [key for key, _ in ops]
    if len(set(keys)) != len(keys):
        raise QuotaConfigError(duplicate_entity_message(pairs))
    valid_entity = validate_entity(pairs)
    changes: dict[str, float | None] = {}
    for key, value in ops:
        if value is not None:
            validate_value(valid_entity, key, value)
        changes[key] = value
    return valid_entity, changes


def duplicate_entity_message(entity: Iterable[tuple[str, str | None]]) -> str:
    """KRaft's answer to an entity altered twice in one request (or with a key twice)."""
    return f"Ignoring duplicate entity ClientQuotaEntity(entries={java_map_text(entity)})"


def entity_key(entity: Entity) -> tuple[tuple[str, str | None], ...]:
    """A hashable, order-independent form of an entity."""
    return tuple(sorted(entity.items(), key=lambda item: item[0]))


def manager_entity(entity: Entity) -> tuple[EntityName, EntityName]:
    """The (user, client_id) pair a quota manager takes for a user/client-id entity."""

    def part(entity_type: str) -> EntityName:
        if entity_type not in entity:
            return None
        name = entity[entity_type]
        return DEFAULT if name is None else name

    return part(USER), part(CLIENT_ID)
