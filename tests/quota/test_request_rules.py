"""The per-request rules gateway and replay share: classification, admission, settlement."""

from __future__ import annotations

import pytest

from quotagate.quota import (
    Cause,
    OtherQuota,
    QuotaManagers,
    RequestFacts,
    admit_mutations,
    classify,
    decide,
    principal_user,
    request_rules,
    settle,
)
from quotagate.quota.request_rules import REQUEST_QUOTA_EXEMPT

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("api_key", "version", "strict"),
    [(19, 6, True), (19, 5, False), (20, 5, True), (20, 4, False), (37, 3, True), (37, 2, False)],
)
def test_mutations_are_strict_from_the_kip_599_versions(
    api_key: int, version: int, strict: bool
) -> None:
    expected = OtherQuota.STRICT_MUTATION if strict else OtherQuota.PERMISSIVE_MUTATION
    assert classify(api_key, version).other is expected


def test_validate_only_mutations_are_not_charged_to_the_mutation_quota() -> None:
    assert classify(19, 7, validate_only=True).other is OtherQuota.NONE


def test_acks_zero_produce_is_exempt_from_request_time_and_acks_all_waits_uncharged() -> None:
    assert not classify(0, 9, acks=0).request_time
    assert classify(0, 9, acks=1).request_time and classify(0, 9, acks=1).upstream_time
    assert not classify(0, 9, acks=-1).upstream_time
    assert classify(0, 9, acks=0).other is OtherQuota.PRODUCE


def test_upstream_time_counts_only_where_the_upstream_cannot_park_the_request() -> None:
    assert classify(3, 12).upstream_time  # Metadata
    assert not classify(1, 13).upstream_time  # Fetch: long poll
    assert not classify(11, 9).upstream_time  # JoinGroup: waits for the rebalance
    assert classify(3, 12).request_time and not classify(4, 7).request_time


def test_follower_fetches_are_exempt_from_both_quotas() -> None:
    follower = classify(1, 13, follower=True)
    assert not follower.request_time and follower.other is OtherQuota.NONE
    consumer = classify(1, 13)
    assert consumer.request_time and consumer.other is OtherQuota.FETCH
    assert not consumer.upstream_time  # long polls are never charged


@pytest.mark.parametrize("api_key", sorted(REQUEST_QUOTA_EXEMPT))
def test_cluster_actions_are_exempt(api_key: int) -> None:
    assert not classify(api_key, 0).request_time


def test_update_features_and_client_apis_are_charged() -> None:
    assert classify(57, 1).request_time  # UpdateFeatures: throttled (RequestQuotaTest)
    assert classify(19, 7).request_time


def test_strict_admission_refuses_topics_while_the_bucket_is_negative() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"user": "alice"}, "controller_mutation_rate", 10)
    quota = managers.controller.new_quota_for(19, 7, "alice", "", NOW)
    # 11 windows x 10/s = a burst of 110 tokens: 100 and 30 pass (the second drives the
    # bucket negative), 5 is refused while it is negative.
    assert admit_mutations(quota, [100, 30, 5, 0], NOW) == [True, True, False, True]
    assert quota.throttle_time(NOW) == 2000


def test_settle_takes_the_largest_throttle_ties_to_request_and_gives_fetch_bytes_back() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"user": "bob"}, "consumer_byte_rate", 1000)
    charging = classify(1, 13)
    fetched = 50_000
    fetch_ms = managers.fetch.record_and_get_throttle_ms("bob", "", fetched, NOW)
    assert fetch_ms > 0
    throttle_ms, cause = settle(
        managers, charging, "bob", "", 0, ((Cause.FETCH, fetch_ms),), NOW, fetched
    )
    assert (throttle_ms, cause) == (fetch_ms, Cause.FETCH)
    # The bytes were taken back: the next small fetch is within the quota again.
    assert managers.fetch.record_and_get_throttle_ms("bob", "", 1, NOW) == 0


def test_decide_reports_error_89_when_a_strict_mutation_topic_is_refused() -> None:
    managers = QuotaManagers.create()
    managers.update_quota({"user": "carol"}, "controller_mutation_rate", 1)
    charging = classify(19, 7)
    # A strict quota admits while tokens remain (the bucket may go negative) and throttles
    # only a refusal: the first request passes unthrottled, the next one is refused.
    first = decide(managers, RequestFacts(charging, "carol", "", 19, 7, NOW, mutation_counts=[20]))
    assert first == (0, Cause.NONE, 0)
    second = RequestFacts(charging, "carol", "", 19, 7, NOW, mutation_counts=[1])
    throttle_ms, cause, error = decide(managers, second)
    assert (cause, error) == (Cause.CONTROLLER_MUTATION, 89) and throttle_ms > 0


def test_principal_user() -> None:
    assert principal_user("User:alice") == "alice"
    assert principal_user("User:ANONYMOUS") == "ANONYMOUS"
    assert principal_user(None) == "ANONYMOUS"
    assert principal_user("") == "ANONYMOUS"
    assert principal_user("alice") == "alice"


def test_distinct_acks_and_versions_sent_by_clients_do_not_grow_the_charging_cache() -> None:
    # A white-box check of a memory bound: acks and versions come from clients.
    create_topics = min(request_rules.MUTATION_APIS)
    before = request_rules._charging.cache_info().currsize
    for acks in range(-300, 300):
        for version in range(40):
            request_rules.classify(request_rules.PRODUCE, version, acks=acks)
            request_rules.classify(create_topics, version)
    # Produce: acks 0, -1 and any other; the mutation API: strict or permissive.
    assert request_rules._charging.cache_info().currsize - before <= 3 + 2
