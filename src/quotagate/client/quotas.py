"""KIP-546 client-quota values as the admin client hands them out and takes them in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """An entity as (type, name) pairs sorted by type; a None name is the default entity.

    Hashable, so describe results can be keyed by it, unlike the ``Mapping`` form the quota
    engine validates.
    """

    entries: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, entity: Mapping[str, str | None]) -> ClientQuotaEntity:
        return cls(tuple(sorted(entity.items())))

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
        return cls(tuple(sorted(pairs)))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.entries)

    def __str__(self) -> str:
        return ", ".join(
            f"{entity_type}={'<default>' if name is None else name}"
            for entity_type, name in self.entries
        )


@dataclass(frozen=True, slots=True)
class QuotaOp:
    """Set ``key`` to ``value``, or remove it when ``value`` is None."""

    key: str
    value: float | None


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    entity: ClientQuotaEntity
    ops: tuple[QuotaOp, ...]

    @classmethod
    def of(
        cls, entity: Mapping[str, str | None], ops: Mapping[str, float | None]
    ) -> ClientQuotaAlteration:
        return cls(
            ClientQuotaEntity.of(entity), tuple(QuotaOp(key, value) for key, value in ops.items())
        )
