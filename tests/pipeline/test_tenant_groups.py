"""Replay groups with tenant quotas: a tenant's clients replay together (issue 25)."""

from __future__ import annotations

import pytest

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.quotas import parse_quotas
from quotagate.pipeline.sharing import has_tenant_quotas, replay_groups
from quotagate.quota import load_quota_file

CLIENT_QUOTAS = '[[quota]]\ndefaults = ["client-id"]\nproducer_byte_rate = 1000\n'
TENANT_QUOTAS = CLIENT_QUOTAS + '[[quota]]\ntenant = "team"\nproducer_byte_rate = 2000\n'
PAIRS = [("User:a", "c1"), ("User:b", "c2"), ("User:c", "c3"), ("User:d", "c4")]
MEMBERS = [("User:a", "c1", "team"), ("User:b", "c2", "team"), ("User:c", "c3", "other")]


def test_a_tenants_clients_join_one_group_when_the_file_has_tenant_quotas() -> None:
    quota_file = load_quota_file(TENANT_QUOTAS)
    assert has_tenant_quotas(quota_file)
    groups = replay_groups(quota_file, PAIRS, MEMBERS)
    assert groups["User:a", "c1"] == groups["User:b", "c2"]
    # Another tenant (its default quota is its own sensor) and no tenant stay apart.
    assert len({groups[pair] for pair in PAIRS}) == 3


def test_without_tenant_quotas_the_groups_are_the_clients_alone() -> None:
    quota_file = load_quota_file(CLIENT_QUOTAS)
    assert not has_tenant_quotas(quota_file)
    assert replay_groups(quota_file, PAIRS, MEMBERS) == replay_groups(quota_file, PAIRS)
    assert len(set(replay_groups(quota_file, PAIRS).values())) == 4


def test_a_client_seen_in_two_tenants_joins_both() -> None:
    # The rules changed during the recording: the client shared sensors with both tenants.
    moved = [*MEMBERS, ("User:a", "c1", "other")]
    groups = replay_groups(load_quota_file(TENANT_QUOTAS), PAIRS, moved)
    assert groups["User:a", "c1"] == groups["User:b", "c2"] == groups["User:c", "c3"]
    assert groups["User:d", "c4"] != groups["User:a", "c1"]


def test_the_candidates_rules_name_the_tenants_and_the_groups_follow() -> None:
    # The recorded tenants say c1 and c2 are one team; the candidate's rules say c3 and c4.
    rules = '[broker]\n"tenant.mapping.rules" = "RULE:client-id:^c([34])$/team/"\n'
    groups = replay_groups(load_quota_file(TENANT_QUOTAS + rules), PAIRS, MEMBERS)
    assert groups["User:c", "c3"] == groups["User:d", "c4"]
    assert len({groups[pair] for pair in PAIRS}) == 3
    recorded = replay_groups(load_quota_file(TENANT_QUOTAS), PAIRS, MEMBERS)
    assert recorded["User:c", "c3"] != recorded["User:d", "c4"]


def test_rules_that_name_no_tenant_leave_every_client_alone() -> None:
    no_rules = load_quota_file(TENANT_QUOTAS + '[broker]\n"tenant.mapping.rules" = ""\n')
    assert len(set(replay_groups(no_rules, PAIRS, MEMBERS).values())) == 4


def test_a_candidates_bad_rules_are_refused_as_the_gateway_refuses_them() -> None:
    bad = TENANT_QUOTAS + '[broker]\n"tenant.mapping.rules" = "RULE:client:^(.*)$/$1/"\n'
    with pytest.raises(PipelineError, match=r"\[broker\] Invalid rule: RULE:client:"):
        parse_quotas(bad, source="candidate.toml")
