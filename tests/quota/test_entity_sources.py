"""Which of Kafka's eight levels configures a sharing key (the metrics' ``source`` label)."""

from __future__ import annotations

import pytest

from quotagate.quota.entity import (
    DEFAULT,
    QUOTA_SOURCES,
    QuotaEntity,
    QuotaLimits,
    quota_source,
)

LEVELS = [
    QuotaEntity("u", "c"),
    QuotaEntity("u", DEFAULT),
    QuotaEntity("u", None),
    QuotaEntity(DEFAULT, "c"),
    QuotaEntity(DEFAULT, DEFAULT),
    QuotaEntity(DEFAULT, None),
    QuotaEntity(None, "c"),
    QuotaEntity(None, DEFAULT),
]


def test_the_eight_levels_have_eight_names_in_precedence_order() -> None:
    assert [quota_source(e) for e in LEVELS] == list(QUOTA_SOURCES)
    assert quota_source(None) == "none"


@pytest.mark.parametrize("level", range(8))
def test_the_most_specific_configured_level_is_the_source(level: int) -> None:
    """Configure every level from ``level`` down: the key resolves to ``level``'s entity."""
    limits = QuotaLimits()
    for value, entity in enumerate(LEVELS[level:]):
        limits.set(entity, 100.0 + value)
    key = limits.sharing_key("u", "c")
    assert limits.source_for_key(key) == LEVELS[level]
    assert limits.limit_for_key(key) == 100.0


def test_a_key_no_entity_configures_has_no_source() -> None:
    limits = QuotaLimits()
    limits.set(QuotaEntity("someone-else", None), 1.0)
    assert limits.source_for_key(limits.sharing_key("u", "c")) is None
