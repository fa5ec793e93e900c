"""Describe filters of KIP-546: which configured entities a DescribeClientQuotas matches."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from quotagate.quota.quota_config import (
    ENTITY_TYPES,
    IP,
    UNSUPPORTED_VERSION,
    Entity,
    QuotaConfigError,
)


class MatchType(enum.IntEnum):
    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: MatchType
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> FilterComponent:
        return cls(entity_type, MatchType.EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> FilterComponent:
        return cls(entity_type, MatchType.DEFAULT, None)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> FilterComponent:
        return cls(entity_type, MatchType.SPECIFIED, None)


@dataclass(frozen=True, slots=True)
class ClientQuotaFilter:
    components: tuple[FilterComponent, ...]
    strict: bool = False

    @classmethod
    def contains(cls, components: Iterable[FilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), False)

    @classmethod
    def contains_only(cls, components: Iterable[FilterComponent]) -> ClientQuotaFilter:
        return cls(tuple(components), True)

    @classmethod
    def all(cls) -> ClientQuotaFilter:
        return cls((), False)

    def validate(self) -> None:
        """Raise ``QuotaConfigError`` with the code a broker would answer with."""
        seen: set[str] = set()
        for component in self.components:
            if not component.entity_type:
                raise QuotaConfigError("Invalid empty entity type in the entity filter")
            if component.entity_type in seen:
                raise QuotaConfigError(
                    f"Entity type {component.entity_type} cannot appear more than once "
                    "in the filter"
                )
            seen.add(component.entity_type)
            if component.entity_type not in ENTITY_TYPES:
                raise QuotaConfigError(
                    f"Custom entity type {component.entity_type} not supported", UNSUPPORTED_VERSION
                )
            if component.match_type is MatchType.EXACT and component.match is None:
                raise QuotaConfigError(
                    f"Request specified MatchType EXACT for {component.entity_type} but no match"
                )
            if component.match_type is not MatchType.EXACT and component.match is not None:
                raise QuotaConfigError(
                    f"Request specified match {component.match!r} for {component.entity_type} "
                    f"with MatchType {component.match_type.name}"
                )
        if IP in seen and len(seen) > 1:
            raise QuotaConfigError("Invalid entity filter component combination")

    def matches(self, entity: Entity) -> bool:
        if self.strict and len(entity) != len(self.components):
            return False
        for component in self.components:
            if component.entity_type not in entity:
                return False
            name = entity[component.entity_type]
            if component.match_type is MatchType.EXACT and name != component.match:
                return False
            if component.match_type is MatchType.DEFAULT and name is not None:
                return False
        return True

    def select(self, entities: Sequence[Entity]) -> list[Entity]:
        self.validate()
        return [entity for entity in entities if self.matches(entity)]
