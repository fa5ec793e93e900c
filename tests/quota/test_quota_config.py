"""Spec §8.3 and §9.9: KIP-546 describe matching and alter validation."""

from __future__ import annotations

import pytest

from kip546_vectors import ENTITIES, FILTER_MATCHES
from quotagate.quota import (
    DEFAULT,
    ClientQuotaFilter,
    FilterComponent,
    MatchType,
    QuotaConfigError,
    validate_alteration,
)
from quotagate.quota.quota_config import manager_entity

F = FilterComponent


@pytest.mark.parametrize(("quota_filter", "matches"), FILTER_MATCHES)
def test_describe_matching(quota_filter: ClientQuotaFilter, matches: int) -> None:
    assert len(quota_filter.select(ENTITIES)) == matches


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        (
            [F.of_entity_type("ip"), F.of_entity("user", "u")],
            42,
            "Invalid entity filter component combination",
        ),
        ([F.of_entity_type("user"), F.of_entity_type("user")], 42, "more than once"),
        ([F("user", MatchType.EXACT, None)], 42, "EXACT"),
        ([F("user", MatchType.DEFAULT, "x")], 42, "MatchType DEFAULT"),
        ([F("", MatchType.SPECIFIED, None)], 42, "empty entity type"),
        ([F.of_entity_type("group")], 35, "not supported"),
    ],
)
def test_describe_filter_errors(components: list[FilterComponent], code: int, message: str) -> None:
    with pytest.raises(QuotaConfigError, match=message) as error:
        ClientQuotaFilter.contains(components).validate()
    assert error.value.error_code == code


USER = [("user", "alice")]


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        (USER, [("foobar", 1.0)], "Invalid configuration key foobar"),
        (USER, [("producer_byte_rate", 0.0)], "must be greater than 0"),
        (USER, [("consumer_byte_rate", -2.0)], "must be greater than 0"),
        (
            USER,
            [("consumer_byte_rate", 2.245)],
            "^consumer_byte_rate cannot be a fractional value.$",
        ),
        (
            USER,
            [("consumer_byte_rate", 3.69e19)],
            "^Proposed value for consumer_byte_rate is too large for a LONG.$",
        ),
        (USER, [("connection_creation_rate", 5.0)], "Invalid configuration key"),
        ([("ip", "1.2.3.4")], [("producer_byte_rate", 5.0)], "Invalid configuration key"),
        (
            [("ip", "1.2.3.4"), ("user", "a")],
            [("connection_creation_rate", 5.0)],
            "^Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId$",
        ),
        (
            [("ip", "not-an-ip")],
            [("connection_creation_rate", 5.0)],
            "^not-an-ip is not a valid IP or resolvable host.$",
        ),
        ([], [("producer_byte_rate", 5.0)], "empty"),
        ([("user", "")], [("producer_byte_rate", 5.0)], "Empty user not supported"),
        (
            [("user", "a"), ("user", "b")],
            [("producer_byte_rate", 5.0)],
            "^Invalid client quota entity, duplicate entity entry user$",
        ),
        ([("group", "a")], [("producer_byte_rate", 5.0)], "Unhandled client quota entity type"),
        (
            [("user", "alice"), ("client-id", None)],
            [("producer_byte_rate", 5.0), ("producer_byte_rate", 6.0)],
            r"^Ignoring duplicate entity "
            r"ClientQuotaEntity\(entries=\{client-id=null, user=alice\}\)$",
        ),
    ],
)
def test_alter_validation_errors(
    entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]], message: str
) -> None:
    with pytest.raises(QuotaConfigError, match=message) as error:
        validate_alteration(entity, ops)
    assert error.value.error_code == 42


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("consumer_byte_rate", 1235.0000001),
        ("request_percentage", 56.62367),
        ("controller_mutation_rate", 0.5),
        ("producer_byte_rate", None),
    ],
)
def test_alter_validation_accepts(key: str, value: float | None) -> None:
    entity, changes = validate_alteration([("user", None), ("client-id", "app")], [(key, value)])
    assert entity == {"user": None, "client-id": "app"}
    assert changes == {key: value}


# ClientQuotaControlManagerTest facts: Long.MAX_VALUE is a valid LONG quota (the comparison
# is in doubles), and a removal is never validated (NONE, nothing removed).
@pytest.mark.parametrize(
    ("entity", "ops"),
    [
        (USER, [("producer_byte_rate", 9223372036854775807.0)]),
        (USER, [("consumer_byte_rate", None)]),
        (USER, [("connection_creation_rate", None)]),
        ([("ip", "10.0.0.1")], [("producer_byte_rate", None)]),
    ],
)
def test_kraft_accepts(
    entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]
) -> None:
    assert validate_alteration(entity, ops)[1] == dict(ops)


def test_ip_entity_accepts_connection_creation_rate_and_default() -> None:
    validate_alteration([("ip", "10.0.0.1")], [("connection_creation_rate", 10.0)])
    validate_alteration([("ip", None)], [("connection_creation_rate", 10.0)])


def test_manager_entity_maps_null_names_to_default() -> None:
    assert manager_entity({"user": None}) == (DEFAULT, None)
    assert manager_entity({"user": "a", "client-id": None}) == ("a", DEFAULT)
    assert manager_entity({"client-id": "c"}) == (None, "c")
