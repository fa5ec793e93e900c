"""Spec §9.9 (Kafka's ClientQuotasRequestTest): 11 user/client-id entities, 2 ip entities,
and how many of them each describe filter matches. The engine tests check the matching
directly; the gateway tests check the same answers over the wire."""

from __future__ import annotations

from typing import Final

from quotagate.quota import ClientQuotaFilter, FilterComponent

F = FilterComponent

ENTITIES: Final[list[dict[str, str | None]]] = [
    {"user": "user-1", "client-id": "client-id-1"},
    {"user": "user-2", "client-id": "client-id-1"},
    {"user": "user-3", "client-id": "client-id-2"},
    {"user": None, "client-id": "client-id-1"},
    {"user": "user-1", "client-id": None},
    {"user": "user-3", "client-id": None},
    {"user": "user-1"},
    {"user": "user-2"},
    {"user": "user-3"},
    {"user": None},
    {"client-id": "client-id-2"},
    {"ip": "1.2.3.4"},
    {"ip": "2.3.4.5"},
]

FILTER_MATCHES: Final[list[tuple[ClientQuotaFilter, int]]] = [
    (ClientQuotaFilter.contains([F.of_entity("user", "user-1")]), 3),
    (ClientQuotaFilter.contains([F.of_entity("user", "unknown")]), 0),
    (ClientQuotaFilter.contains([F.of_entity("client-id", "client-id-2")]), 2),
    (ClientQuotaFilter.contains([F.of_default_entity("user")]), 2),
    (ClientQuotaFilter.contains_only([F.of_entity("user", "user-2")]), 1),
    (ClientQuotaFilter.contains_only([F.of_entity("client-id", "client-id-1")]), 0),
    (ClientQuotaFilter.contains_only([F.of_entity_type("user")]), 4),
    (ClientQuotaFilter.contains([F.of_entity_type("user")]), 10),
    (ClientQuotaFilter.contains_only([F.of_entity_type("client-id")]), 1),
    (ClientQuotaFilter.contains([F.of_entity_type("client-id")]), 7),
    (ClientQuotaFilter.contains([F.of_entity_type("ip")]), 2),
    (ClientQuotaFilter.contains([]), 13),
    (ClientQuotaFilter.contains_only([]), 0),
]
