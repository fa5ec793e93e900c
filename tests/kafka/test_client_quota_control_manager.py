"""Kafka's ``ClientQuotaControlManagerTest`` (metadata, ``org.apache.kafka.controller``): the KRaft
controller's AlterClientQuotas validation and state, as vectors.

Driven through what the gateway runs for AlterClientQuotas: ``alter_client_quotas`` (the
request as the controller decides it: per entity, KRaft's codes and texts), then
``QuotaRuntime.alter_client_quotas``, whose returned changes are the gateway's counterpart of
the controller's records (a value set to what it already is, or a removal of a key not set,
writes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.quota import QUOTA_KEYS, QuotaConfigError
from quotagate.quota.quota_config import (
    EntityOutcome,
    alter_client_quotas,
    validate_entity,
    validate_value,
)
from quotagate.store.quotas import Change, entity_key

INVALID_REQUEST = 42
Pairs = Sequence[tuple[str, str | None]]


def _alter(
    runtime: QuotaRuntime, entity: Pairs, ops: Mapping[str | None, float | None]
) -> tuple[EntityOutcome, list[Change]]:
    """One AlterClientQuotas entry as the gateway decides and applies it."""
    outcomes, changes = alter_client_quotas([(entity, list(ops.items()))])
    (outcome,) = outcomes
    applied = runtime.store_sync.alter_client_quotas(
        [Change(e, key, value) for e, key, value in changes], "User:admin", "test"
    )
    return outcome, applied


def _applied(runtime: QuotaRuntime, entity: Pairs, ops: Mapping[str, float | None]) -> list[Change]:
    outcome, applied = _alter(runtime, entity, ops)
    assert outcome.error_code == 0, outcome.error_message
    return applied


def _quotas(runtime: QuotaRuntime, entity: Pairs) -> dict[str, float] | None:
    return runtime.store_sync.client_quotas.get(entity_key(dict(entity)))


@pytest.mark.parametrize(
    "entity",
    [
        [("foo", "bar")],
        [(None, "null")],
        [("user", "user-1"), ("foo", "bar")],
        [("foo", "bar"), ("ip", "1.2.3.4")],
        [("user", "user-1"), ("ip", "1.2.3.4")],
        [("client-id", "user-1"), ("ip", "1.2.3.4")],
        [],
    ],
)
def test_invalid_entity_types(entity: Pairs) -> None:
    """ClientQuotaControlManagerTest.testInvalidEntityTypes: unknown and null types, a valid
    type with an unknown one, IP combined with others, the empty entity; nothing applied."""
    runtime = QuotaRuntime(QuotaSettings())
    outcome, applied = _alter(runtime, entity, {"producer_byte_rate": 10000.0})
    assert outcome.error_code == INVALID_REQUEST
    assert applied == [] and runtime.store_sync.client_quotas == {}


@pytest.mark.parametrize(
    "ops",
    [
        [("not.a.quota.key", 0.0), ("request_percentage", 99.9)],
        [("request_percentage", 99.9), ("not.a.quota.key", 0.0)],
        [(None, 99.9)],
    ],
)
def test_invalid_quota_keys(ops: list[tuple[str | None, float | None]]) -> None:
    """ClientQuotaControlManagerTest.testInvalidQuotaKeys: one bad key fails the whole entity,
    before or after a good one; nothing applied."""
    runtime = QuotaRuntime(QuotaSettings())
    outcome, applied = _alter(runtime, [("user", "user-1")], dict(ops))
    assert outcome.error_code == INVALID_REQUEST
    assert applied == [] and runtime.store_sync.client_quotas == {}


def test_alter_and_remove() -> None:
    """ClientQuotaControlManagerTest.testAlterAndRemove"""
    runtime = QuotaRuntime(QuotaSettings())
    user = [("user", "user-1")]
    _applied(runtime, user, {"producer_byte_rate": 10000.0})
    assert _quotas(runtime, user) == {"producer_byte_rate": 10000.0}
    _applied(runtime, user, {"producer_byte_rate": 10001.0, "consumer_byte_rate": 20000.0})
    assert _quotas(runtime, user) == {"producer_byte_rate": 10001.0, "consumer_byte_rate": 20000.0}
    _applied(runtime, user, {"producer_byte_rate": None})
    assert _quotas(runtime, user) == {"consumer_byte_rate": 20000.0}
    assert _applied(runtime, user, {"request_percentage": None}) == []  # not set: no change
    assert _quotas(runtime, user) == {"consumer_byte_rate": 20000.0}
    _applied(runtime, user, {"consumer_byte_rate": None})
    assert _quotas(runtime, user) is None  # the last key gone, the entity is gone
    assert _applied(runtime, user, {"consumer_byte_rate": None}) == []
    assert _quotas(runtime, user) is None
    _alter(
        runtime,
        user,
        {
            "request_percentage": 99.0,
            "controller_mutation_rate": None,
            "producer_byte_rate": 10002.0,
            "consumer_byte_rate": 20001.0,
        },
    )
    assert _quotas(runtime, user) == {
        "consumer_byte_rate": 20001.0,
        "producer_byte_rate": 10002.0,
        "request_percentage": 99.0,
    }


def test_entity_types() -> None:
    """ClientQuotaControlManagerTest.testEntityTypes: every user/client-id shape, defaults
    (null names) included, gives exactly one change each."""
    runtime = QuotaRuntime(QuotaSettings())
    entities: list[tuple[Pairs, float]] = [
        ([("user", "user-1"), ("client-id", "client-id-1")], 50.50),
        ([("user", "user-2"), ("client-id", "client-id-1")], 51.51),
        ([("user", "user-3"), ("client-id", "client-id-2")], 52.52),
        ([("user", None), ("client-id", "client-id-1")], 53.53),
        ([("user", "user-1"), ("client-id", None)], 54.54),
        ([("user", "user-3"), ("client-id", None)], 55.55),
        ([("user", "user-1")], 56.56),
        ([("user", "user-2")], 57.57),
        ([("user", "user-3")], 58.58),
        ([("user", None)], 59.59),
        ([("client-id", "client-id-2")], 60.60),
    ]
    records = []
    for entity, value in entities:
        records += _applied(runtime, entity, {"request_percentage": value})
    assert len(records) == len(entities)
    assert {(entity_key(c.entity), c.key, c.value) for c in records} == {
        (entity_key(dict(entity)), "request_percentage", value) for entity, value in entities
    }


def test_is_valid_ip_entity_with_null() -> None:
    """ClientQuotaControlManagerTest.testIsValidIpEntityWithNull: the default IP entity."""
    assert validate_entity([("ip", None)]) == {"ip": None}


def test_is_valid_ip_entity_with_unresolvable_hostname() -> None:
    """ClientQuotaControlManagerTest.testIsValidIpEntityWithUnresolvableHostname"""
    with pytest.raises(QuotaConfigError):
        validate_entity([("ip", "example.invalid")])


def test_is_valid_ip_entity_with_localhost() -> None:
    """ClientQuotaControlManagerTest.testIsValidIpEntityWithLocalhost"""
    assert validate_entity([("ip", "127.0.0.1")]) == {"ip": "127.0.0.1"}


def _keys_for(entity_types: Sequence[str]) -> set[str]:
    """The quota keys an entity of these types accepts (Kafka's configKeysForEntityType)."""
    entity = validate_entity([(t, "127.0.0.1" if t == "ip" else "foo") for t in entity_types])
    accepted = set()
    for key in QUOTA_KEYS:
        try:
            validate_value(entity, key, 1.0)
        except QuotaConfigError:
            continue
        accepted.add(key)
    return accepted


CLIENT_KEYS = {
    "producer_byte_rate",
    "consumer_byte_rate",
    "controller_mutation_rate",
    "request_percentage",
}


def test_config_keys_for_entity_type_with_user() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEntityTypeWithUser"""
    assert _keys_for(["user"]) == CLIENT_KEYS


def test_config_keys_for_entity_type_with_client_id() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEntityTypeWithClientId"""
    assert _keys_for(["client-id"]) == CLIENT_KEYS


def test_config_keys_for_entity_type_with_user_and_client_id() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEntityTypeWithUserAndClientId"""
    assert _keys_for(["client-id", "user"]) == CLIENT_KEYS


def test_config_keys_for_entity_type_with_ip() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEntityTypeWithIp"""
    assert _keys_for(["ip"]) == {"connection_creation_rate"}


def _entity_error(entity: Pairs) -> tuple[int, str]:
    with pytest.raises(QuotaConfigError) as error:
        validate_entity(entity)
    return error.value.error_code, str(error.value)


def test_config_keys_for_empty_entity() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEmptyEntity"""
    assert _entity_error([]) == (INVALID_REQUEST, "Invalid empty client quota entity")


COMBINATION = (
    "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
)


def test_config_keys_for_entity_type_with_ip_and_user() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEntityTypeWithIpAndUser"""
    assert _entity_error([("ip", "127.0.0.1"), ("user", "foo")]) == (INVALID_REQUEST, COMBINATION)


def test_config_keys_for_entity_type_with_ip_and_client_id() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForEntityTypeWithIpAndClientId"""
    assert _entity_error([("ip", "127.0.0.1"), ("client-id", "foo")]) == (
        INVALID_REQUEST,
        COMBINATION,
    )


def test_config_keys_for_unresolvable_ip_entity() -> None:
    """ClientQuotaControlManagerTest.testConfigKeysForUnresolvableIpEntity"""
    assert _entity_error([("ip", "example.invalid")]) == (
        INVALID_REQUEST,
        "example.invalid is not a valid IP or resolvable host.",
    )


CLIENT_ID_ENTITY = {"client-id": "foo"}


@pytest.mark.parametrize(
    ("test", "key", "value", "message"),
    [
        ("testValidateQuotaKeyValueForUnknownQuota", "foobar", 1.0,
         "Invalid configuration key foobar"),
        ("testValidateQuotaKeyValueForZeroQuota", "producer_byte_rate", 0.0,
         "Quota producer_byte_rate must be greater than 0"),
        ("testValidateQuotaKeyValueForNegativeQuota", "consumer_byte_rate", -2.0,
         "Quota consumer_byte_rate must be greater than 0"),
        ("testValidateQuotaKeyValueForConsumerByteRateTooLarge", "consumer_byte_rate",
         36893488147419103232.4, "Proposed value for consumer_byte_rate is too large for a LONG."),
        ("testValidateQuotaKeyValueForFractionalConsumerByteRate", "consumer_byte_rate", 2.245,
         "consumer_byte_rate cannot be a fractional value."),
    ],
)  # fmt: skip
def test_validate_quota_key_value_errors(test: str, key: str, value: float, message: str) -> None:
    """ClientQuotaControlManagerTest.testValidateQuotaKeyValue* (the refusals, by ``test``)"""
    with pytest.raises(QuotaConfigError) as error:
        validate_value(CLIENT_ID_ENTITY, key, value)
    assert (error.value.error_code, str(error.value)) == (INVALID_REQUEST, message)


@pytest.mark.parametrize(
    ("test", "key", "value"),
    [
        ("testValidateQuotaKeyValueForValidConsumerByteRate", "consumer_byte_rate", 1234.0),
        ("testValidateQuotaKeyValueForValidConsumerByteRate2", "consumer_byte_rate", 1235.0000001),
        ("testValidateQuotaKeyValueForValidRequestPercentage", "request_percentage", 56.62367),
    ],
)
def test_validate_quota_key_value_accepts(test: str, key: str, value: float) -> None:
    """ClientQuotaControlManagerTest.testValidateQuotaKeyValue* (the acceptances, by ``test``)"""
    validate_value(CLIENT_ID_ENTITY, key, value)


# Documented differences (docs/engine.md), next to the Kafka tests they depart from: these
# vectors assert the gateway's behaviour, not Kafka's.


def test_difference_ip_entity_is_never_resolved() -> None:
    """Departs from ClientQuotaControlManagerTest.testIsValidIpEntityWithLocalhost's premise:
    KRaft accepts a host name it can resolve; the gateway does no DNS, so ``localhost`` is
    refused with Kafka's own text."""
    assert _entity_error([("ip", "localhost")]) == (
        INVALID_REQUEST,
        "localhost is not a valid IP or resolvable host.",
    )


def test_difference_nan_quota_is_refused() -> None:
    """Departs from ClientQuotaControlManager.validateQuotaKeyValue (every check compares false
    for NaN, so KRaft accepts it): a NaN bound would drive every later decision."""
    with pytest.raises(QuotaConfigError) as error:
        validate_value(CLIENT_ID_ENTITY, "request_percentage", float("nan"))
    assert (error.value.error_code, str(error.value)) == (
        INVALID_REQUEST,
        "Quota request_percentage must be greater than 0",
    )
