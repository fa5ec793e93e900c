"""Redpanda's ``client-id-prefix`` entities: twelve levels, matching, sharing (issue 25).

The levels and the examples are facts of Redpanda's "About Client Throughput Quotas": a prefix
sits right after the exact client id of the same user level, the clients it matches share one
rate (within one user, or across all users for a prefix alone), and an exact client id takes
precedence over a prefix.
"""

from __future__ import annotations

import pytest

from quotagate.quota import QuotaConfigError
from quotagate.quota.client_quota_manager import ClientQuotaManager
from quotagate.quota.entity import (
    DEFAULT,
    PREFIX_SOURCES,
    ClientIdPrefix,
    QuotaEntity,
    QuotaLimits,
    quota_source,
)
from quotagate.quota.quota_config import alter_client_quotas, manager_entity, validate_entity

PREFIX = ClientIdPrefix("bar-")

# Redpanda's levels 1 to 11, most specific first, for user "u" and client id "bar-1".
LEVELS = [
    QuotaEntity("u", "bar-1"),
    QuotaEntity("u", PREFIX),
    QuotaEntity("u", DEFAULT),
    QuotaEntity("u", None),
    QuotaEntity(DEFAULT, "bar-1"),
    QuotaEntity(DEFAULT, PREFIX),
    QuotaEntity(DEFAULT, DEFAULT),
    QuotaEntity(DEFAULT, None),
    QuotaEntity(None, "bar-1"),
    QuotaEntity(None, PREFIX),
    QuotaEntity(None, DEFAULT),
]
# The tracker key each level shares (Redpanda's "Tracker key" column).
KEYS = [
    ("u", "bar-1"),
    ("u", "bar-*"),
    ("u", "bar-1"),
    ("u", ""),
    ("u", "bar-1"),
    ("u", "bar-*"),
    ("u", "bar-1"),
    ("u", ""),
    ("", "bar-1"),
    ("", "bar-*"),
    ("", "bar-1"),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_of_the_twelve_levels_applies(level: int) -> None:
    """Configure every level from ``level`` down: that level's entity applies, with its key."""
    limits = QuotaLimits()
    for value, entity in enumerate(LEVELS[level:]):
        limits.set(entity, 100.0 + value)
    key = limits.sharing_key("u", "bar-1")
    assert key == KEYS[level]
    assert limits.source_for_key(key) == LEVELS[level]
    assert limits.limit_for_key(key) == 100.0


def test_prefix_levels_have_their_own_source_names() -> None:
    assert [quota_source(LEVELS[i]) for i in (1, 5, 9)] == list(PREFIX_SOURCES)


def test_a_client_id_the_prefix_does_not_start_falls_through() -> None:
    limits = QuotaLimits()
    limits.set(QuotaEntity(None, PREFIX), 100.0)
    limits.set(QuotaEntity(None, DEFAULT), 50.0)
    assert limits.sharing_key("u", "foo-1") == ("", "foo-1")
    assert limits.limit_for_key(("", "foo-1")) == 50.0
    # Matching is a plain prefix test: case and position count.
    assert limits.sharing_key("u", "BAR-1") == ("", "BAR-1")
    assert limits.sharing_key("u", "xbar-1") == ("", "xbar-1")


def test_redpanda_precedence_example_with_a_prefix() -> None:
    """Redpanda's example (alice+app-1, alice, app-1) with a prefix ``app-`` added."""
    limits = QuotaLimits()
    limits.set(QuotaEntity("alice", "app-1"), 5e6)
    limits.set(QuotaEntity("alice", None), 10e6)
    limits.set(QuotaEntity(None, "app-1"), 20e6)
    limits.set(QuotaEntity(None, ClientIdPrefix("app-")), 30e6)
    expected = {
        ("alice", "app-1"): 5e6,  # level 1
        ("alice", "app-2"): 10e6,  # level 4
        ("bob", "app-1"): 20e6,  # level 9: the exact client id outranks the prefix
        ("bob", "app-2"): 30e6,  # level 10
        ("bob", "other"): None,  # level 12: no quota
    }
    for (user, client), value in expected.items():
        assert limits.limit_for_key(limits.sharing_key(user, client)) == value


def test_the_longest_matching_prefix_wins() -> None:
    limits = QuotaLimits()
    limits.set(QuotaEntity(None, ClientIdPrefix("a")), 1.0)
    limits.set(QuotaEntity(None, ClientIdPrefix("ab-")), 2.0)
    assert limits.limit_for_key(limits.sharing_key("u", "ab-1")) == 2.0
    assert limits.limit_for_key(limits.sharing_key("u", "ax")) == 1.0


def test_matching_clients_share_one_rate_with_kafkas_arithmetic() -> None:
    """Two clients under one prefix are throttled exactly as one client sending both loads."""
    shared = ClientQuotaManager("produce", 2, 1)
    shared.update_quota(None, ClientIdPrefix("bar-"), 1000.0)
    single = ClientQuotaManager("produce", 2, 1)
    single.update_quota(None, "bar", 1000.0)
    now = 1_700_000_000_000
    for step in range(40):
        client = "bar-1" if step % 2 else "bar-2"
        got = shared.record_and_get_throttle_ms("u", client, 300, now + step * 50)
        want = single.record_and_get_throttle_ms("u", "bar", 300, now + step * 50)
        assert got == want
    assert shared.quota_metric("u", "bar-1") is shared.quota_metric("v", "bar-2")


def test_user_prefix_shares_within_one_user_only() -> None:
    limits = QuotaLimits()
    limits.set(QuotaEntity(DEFAULT, PREFIX), 100.0)
    assert limits.sharing_key("alice", "bar-1") == limits.sharing_key("alice", "bar-2")
    assert limits.sharing_key("alice", "bar-1") != limits.sharing_key("bob", "bar-1")


def test_removing_the_prefix_quota_leaves_the_clients_unbounded() -> None:
    manager = ClientQuotaManager("produce", 2, 1)
    manager.update_quota(None, PREFIX, 100.0)
    assert manager.quota_applies("u", "bar-1")
    manager.update_quota(None, PREFIX, None)
    assert not manager.quota_applies("u", "bar-1")


def test_entities_with_a_prefix_validate() -> None:
    assert manager_entity(validate_entity([("client-id-prefix", "bar-")])) == (None, PREFIX)
    assert manager_entity(validate_entity([("user", None), ("client-id-prefix", "bar-")])) == (
        DEFAULT,
        PREFIX,
    )
    for bad, message in [
        ([("client-id-prefix", None)], "needs a prefix"),
        ([("client-id-prefix", "")], "Empty client-id-prefix"),
        ([("client-id", "a"), ("client-id-prefix", "b")], "only be combined with user"),
        ([("ip", "1.2.3.4"), ("client-id-prefix", "b")], "IP entity"),
        ([("tenant", "t"), ("user", "u")], "tenant cannot be combined"),
    ]:
        with pytest.raises(QuotaConfigError, match=message):
            validate_entity(bad)


def test_alteration_of_prefix_and_tenant_entities() -> None:
    outcomes, changes = alter_client_quotas(
        [
            ([("client-id-prefix", "bar-")], [("producer_byte_rate", 1024.0)]),
            ([("tenant", None)], [("request_percentage", 50.0)]),
            ([("tenant", "t")], [("connection_creation_rate", 5.0)]),
        ]
    )
    assert sorted(o.error_code for o in outcomes) == [0, 0, 42]
    assert ({"client-id-prefix": "bar-"}, "producer_byte_rate", 1024.0) in changes
    assert ({"tenant": None}, "request_percentage", 50.0) in changes
