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
from quotagate.quota.quota_config import alter_client_quotas, manager_entity

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


# AlterClientQuotasRequest.entries() reads each entity into a HashMap, so in KRaft a type
# given twice keeps its last name (the controller's duplicate-entry check never sees it).
def test_alter_entity_type_given_twice_keeps_the_last_name() -> None:
    entity, _ = validate_alteration([("user", "a"), ("user", "b")], [("producer_byte_rate", 5.0)])
    assert entity == {"user": "b"}


# KRaft checks an entity's types and then its ops in HashMap order, so with two faults the one
# it names is the first in that order: client-id before user, consumer_byte_rate before
# producer_byte_rate (request order would name the other).
@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([("user", ""), ("client-id", "")], [("producer_byte_rate", 5.0)],
         "Empty client-id not supported"),
        ([("user", "a")], [("producer_byte_rate", -1.0), ("consumer_byte_rate", 2.5)],
         "consumer_byte_rate cannot be a fractional value."),
    ],
)  # fmt: skip
def test_alter_names_the_first_fault_in_kafkas_order(
    entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]], message: str
) -> None:
    with pytest.raises(QuotaConfigError) as error:
        validate_alteration(entity, ops)
    assert str(error.value) == message


# ClientQuotaControlManager.alterClientQuotas answers per entity: an entity given again in one
# request is answered "Ignoring duplicate entity", replacing its first answer, while the first
# alteration's changes still apply; a failing entity applies none of its changes.
def test_alter_request_answers_once_per_entity() -> None:
    outcomes, changes = alter_client_quotas(
        [
            ([("user", "alice")], [("producer_byte_rate", 100.0)]),
            ([("user", "bob")], [("producer_byte_rate", 200.0), ("consumer_byte_rate", -1.0)]),
            ([("user", "alice")], [("consumer_byte_rate", 300.0)]),
        ]
    )
    answers = {tuple(o.entity): (o.error_code, o.error_message) for o in outcomes}
    assert answers == {
        (("user", "alice"),): (
            42,
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})",
        ),
        (("user", "bob"),): (42, "Quota consumer_byte_rate must be greater than 0"),
    }
    assert changes == [({"user": "alice"}, "producer_byte_rate", 100.0)]


# Kafka's response lists entities in the order of its HashMap keyed by ClientQuotaEntity
# (hash: 31 + the sum of key-hash ^ name-hash): buckets 15, 15, 12 and 13 here.
def test_alter_request_lists_entities_in_kafkas_order() -> None:
    sent = [[("user", "a")], [("client-id", "b")], [("user", None)], [("client-id", None)]]
    outcomes, _ = alter_client_quotas([(e, [("request_percentage", 50.0)]) for e in sent])
    assert [o.entity for o in outcomes] == [sent[2], sent[3], sent[0], sent[1]]
    assert all(o.error_code == 0 for o in outcomes)
