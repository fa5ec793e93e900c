"""Replay with tenant quotas is the gateway's twin (issue 25): a real gateway run, replayed.

A real gateway in front of a real tansu broker maps client ids to a tenant
(``tenant.mapping.rules``) and enforces a quota file with tenant quotas applied through
``quotagate quotas apply``; greedy producers of the tenant, one of them also under a client
quota, a fetching member and a client outside the tenant run while it writes usage events.
The events are replayed in one plain Python process group by group, as the Spark replay deals
them (``sharing.replay_groups``): the replayed throttles must equal the recorded ones on at
least 99.9 % of the requests, and so through the Spark replay. The same events replayed
without their tenants (the tenant level unseen) disagree widely, so the test can fail. With
the gateway's own ``tenant.mapping.rules`` in the candidate file the tenants are named again
from the rules (not read from the events) and agree as well; rules that put another client in
the team change its group and the result. The run's set-up is the gateway fidelity test's
(``support.recorded_run``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.pipeline.quotas import parse_quotas
from quotagate.pipeline.recommend.job import RecommendOptions, recommend
from quotagate.pipeline.replay.core import replay_table
from quotagate.pipeline.replay.job import replay
from quotagate.pipeline.report.job import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.pipeline.sharing import replay_groups
from quotagate.quota import load_quota_file
from quotagate.usage.schema import USAGE_COLUMNS
from support.recorded_run import consume, produce, record, start_recording_gateway

RUN_S = 10.0
RULES = "RULE:client-id:^(team)-.*$/$1/"
MEMBERS = ("team-a", "team-b", "team-c")
QUOTA_FILE = """
[[quota]]
tenant = "team"
producer_byte_rate = 150000
consumer_byte_rate = 60000

[[quota]]
client-id = "team-a"
producer_byte_rate = 40000

[[quota]]
client-id = "solo"
producer_byte_rate = 80000
"""
WITH_RULES = f'{QUOTA_FILE}\n[broker]\n"tenant.mapping.rules" = "{RULES}"\n'
SOLO_JOINS = (
    f'{QUOTA_FILE}\n[broker]\n"tenant.mapping.rules" = "{RULES},RULE:client-id:^solo$/team/"\n'
)


def _replay_by_groups(events: pa.Table, quota_text: str) -> pa.Table:
    """Every replay group on its own engine, as the Spark replay's slots run them."""
    keys = events.select(["principal", "client_id", "tenant"]).to_pylist()
    members = {(k["principal"], k["client_id"], k["tenant"]) for k in keys}
    pairs = {(p, c) for p, c, _ in members}
    groups = replay_groups(parse_quotas(quota_text), pairs, members)
    group_of = pa.array([groups[(k["principal"], k["client_id"])] for k in keys], pa.int64())
    replayed = [
        replay_table(events.filter(pc.equal(group_of, group)), quota_text, closed_loop=False)
        for group in sorted(set(groups.values()))
    ]
    return pa.concat_tables(replayed)


def _agreement(replayed: pa.Table) -> float:
    same = pc.equal(replayed.column("predicted_throttle_ms"), replayed.column("throttle_ms"))
    return pc.sum(same.cast(pa.int64())).as_py() / replayed.num_rows


@pytest.fixture(scope="module")
def recorded(
    start_tansu: Callable[[], TansuBroker],
    start_module_gateway: Callable[..., BackgroundGateway],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A recorded gateway run with tenant quotas: its usage directory."""
    usage_dir = tmp_path_factory.mktemp("tenant-fidelity") / "usage"
    recording = start_recording_gateway(
        start_tansu, start_module_gateway, usage_dir, QUOTA_FILE, tenant_mapping_rules=RULES
    )
    bootstrap, topic = recording.bootstrap, recording.topic
    small = {"batch.size": 4096, "queue.buffering.max.messages": 64}
    producers = [
        partial(produce, bootstrap, who, topic, payload=1000, config=small)
        for who in (*MEMBERS, "solo")
    ]
    return record(recording, RUN_S, [*producers, partial(consume, bootstrap, "team-reader", topic)])


def _events(recorded: Path) -> pa.Table:
    events = ds.dataset(recorded, format="parquet", partitioning="hive").to_table()
    return events.select(list(USAGE_COLUMNS))


def _blind(events: pa.Table) -> pa.Table:
    """The events without the tenants the gateway recorded."""
    index = events.schema.get_field_index("tenant")
    return events.set_column(index, "tenant", pa.array([""] * events.num_rows))


@pytest.mark.timeout(300)
def test_replay_with_tenant_quotas_reproduces_the_recorded_throttles(recorded: Path) -> None:
    events = _events(recorded)
    tenants = set(events.column("tenant").to_pylist())
    assert tenants == {"team", ""}, tenants
    assert events.num_rows > 800, events.num_rows
    replayed = _replay_by_groups(events, QUOTA_FILE)
    assert replayed.num_rows == events.num_rows
    # The replay names the level that throttled as the gateway did.
    same = pc.equal(replayed.column("predicted_cause"), replayed.column("throttle_cause"))
    assert pc.sum(same.cast(pa.int64())).as_py() >= 0.999 * replayed.num_rows
    team = replayed.filter(pc.equal(replayed.column("tenant"), "team"))
    throttled_causes = set(team.filter(pc.greater(team.column("throttle_ms"), 0))
                           .column("throttle_cause").to_pylist())  # fmt: skip
    # Both levels throttled the team: team-a's own quota, the tenant's produce and fetch.
    assert {"produce", "tenant_produce", "tenant_fetch"} <= throttled_causes, throttled_causes
    agreement = _agreement(replayed)
    print(f"tenant replay: {replayed.num_rows} requests, agreement {agreement:.5f}")
    assert agreement >= 0.999, agreement

    # Without the tenants the replay cannot see the tenant level: the team's throttles differ.
    blind_agreement = _agreement(_replay_by_groups(_blind(events), QUOTA_FILE))
    print(f"replayed without tenants: agreement {blind_agreement:.5f}")
    assert blind_agreement < 0.99, blind_agreement


@pytest.mark.timeout(300)
def test_the_gateways_rules_in_the_candidate_name_the_tenants_the_gateway_named(
    recorded: Path,
) -> None:
    """The events' tenants unread: the candidate's tenant.mapping.rules (the gateway's own)
    name them again, through the gateway's mapper, and group a tenant's clients again."""
    blind = _blind(_events(recorded))
    replayed = _replay_by_groups(blind, WITH_RULES)
    same = pc.equal(replayed.column("predicted_cause"), replayed.column("throttle_cause"))
    assert pc.sum(same.cast(pa.int64())).as_py() >= 0.999 * replayed.num_rows
    agreement = _agreement(replayed)
    print(f"tenants from the candidate's rules: agreement {agreement:.5f}")
    assert agreement >= 0.999, agreement


@pytest.mark.timeout(300)
def test_rules_in_the_candidate_that_make_another_team_change_the_result(
    recorded: Path,
) -> None:
    """What if "solo" were one of the team: it joins the team's group and its sensors."""
    events = _events(recorded)
    keys = events.select(["principal", "client_id", "tenant"]).to_pylist()
    members = {(k["principal"], k["client_id"], k["tenant"]) for k in keys}
    groups = replay_groups(parse_quotas(SOLO_JOINS), {(p, c) for p, c, _ in members}, members)
    solo = next(group for (_, client), group in groups.items() if client == "solo")
    team_a = next(group for (_, client), group in groups.items() if client == "team-a")
    assert solo == team_a
    replayed = _replay_by_groups(events, SOLO_JOINS)
    solo_rows = replayed.filter(pc.equal(replayed.column("client_id"), "solo"))
    causes = set(solo_rows.column("predicted_cause").to_pylist())
    assert "tenant_produce" in causes, causes
    agreement = _agreement(replayed)
    print(f"solo in the team: agreement {agreement:.5f}")
    assert agreement < 0.99, agreement


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_spark_replay_deals_a_tenant_to_one_slot(
    recorded: Path, spark: SparkSession, tmp_path: Path
) -> None:
    summary = replay(spark, recorded, QUOTA_FILE, tmp_path / "replay")
    print(f"spark tenant replay: {summary}")
    assert summary["events"] > 800, summary
    assert summary["agreement_with_recorded"] >= 0.999, summary

    # The events without their tenants, the candidate's rules naming them: the slots are
    # dealt by the candidate's tenants, and "solo" made a member changes the result.
    partitioned = ds.dataset(recorded, format="parquet", partitioning="hive").to_table()
    blind = tmp_path / "blind"
    pq.write_to_dataset(_blind(partitioned), blind, partition_cols=["date", "hour"])
    ruled = replay(spark, blind, WITH_RULES, tmp_path / "ruled")
    assert ruled["events"] == summary["events"]
    assert ruled["agreement_with_recorded"] >= 0.999, ruled
    moved = replay(spark, blind, SOLO_JOINS, tmp_path / "moved")
    assert moved["agreement_with_recorded"] < 0.99, moved


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_rollup_recommend_and_report_per_tenant(
    recorded: Path, spark: SparkSession, tmp_path: Path
) -> None:
    events = ds.dataset(recorded, format="parquet", partitioning="hive").to_table().to_pandas()
    team = events[events["tenant"] == "team"]
    summary = rollup(spark, recorded, tmp_path / "rollup", quota_text=QUOTA_FILE)
    assert summary["tenants"] == 1
    entities = pd.read_parquet(tmp_path / "rollup" / "tenants" / "entities")
    produce = entities[entities["quota_type"] == "produce"].iloc[0]
    # The members' combined usage, its quota, and the throttles the tenant level imposed.
    assert produce["share_user"] == "team" and produce["members"] == len(MEMBERS)
    assert produce["total"] == team.loc[team["api_key"] == 0, "request_bytes"].sum()
    assert produce["quota_limit"] == 150_000
    tenant_throttled = team[team["throttle_cause"] == "tenant_produce"]
    assert produce["throttled_requests"] == len(tenant_throttled) > 0

    quota_path = tmp_path / "recommended.toml"
    result = recommend(spark, tmp_path / "rollup", quota_path, RecommendOptions(headroom=1.5))
    assert result["tenants"] == 1
    proposed = [e for e in load_quota_file(quota_path.read_text()).entries if "tenant" in e.entity]
    assert [e.entity for e in proposed] == [{"tenant": "team"}]
    # Held to 150 kB/s, the tenant's p99 sustained rate is about that: 1.5 x is above it.
    assert 150_000 < proposed[0].config["producer_byte_rate"] < 1.5 * 1.2 * 150_000

    page = report(
        ReportInputs(tmp_path / "rollup", recommendation=quota_path), tmp_path / "r.html"
    ).read_text()
    assert "<h2>Tenants</h2>" in page and "<td>team</td>" in page


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_rollup_and_recommend_follow_and_carry_the_candidates_rules(
    recorded: Path, spark: SparkSession, tmp_path: Path
) -> None:
    """--quotas with [broker] rules: the rollup's tenants are the ones they name (solo joins
    the team), and recommend writes the same [broker] beside the tenant quota it proposes."""
    events = ds.dataset(recorded, format="parquet", partitioning="hive").to_table().to_pandas()
    joined = events[(events["tenant"] == "team") | (events["client_id"] == "solo")]
    candidate = SOLO_JOINS + '"quota.exempt.principals" = ["User:canary"]\n'
    rollup(spark, recorded, tmp_path / "rollup", quota_text=candidate)
    entities = pd.read_parquet(tmp_path / "rollup" / "tenants" / "entities")
    produce = entities[entities["quota_type"] == "produce"].iloc[0]
    assert produce["share_user"] == "team" and produce["members"] == len(MEMBERS) + 1
    assert produce["total"] == joined.loc[joined["api_key"] == 0, "request_bytes"].sum()

    quota_path = tmp_path / "recommended.toml"
    recommend(spark, tmp_path / "rollup", quota_path, RecommendOptions())
    proposed = load_quota_file(quota_path.read_text())
    assert proposed.tenant_mapping_rules == f"{RULES},RULE:client-id:^solo$/team/"
    assert proposed.exempt_principals == ["User:canary"]
    assert any(e.entity == {"tenant": "team"} for e in proposed.entries)
