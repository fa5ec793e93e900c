"""Replay with tenant quotas is the gateway's twin (issue 25): a real gateway run, replayed.

A real gateway in front of a real tansu broker maps client ids to a tenant
(``tenant.mapping.rules``) and enforces a quota file with tenant quotas applied through
``quotagate quotas apply``; greedy producers of the tenant, one of them also under a client
quota, a fetching member and a client outside the tenant run while it writes usage events.
The events are replayed in one plain Python process group by group, as the Spark replay deals
them (``sharing.replay_groups``): the replayed throttles must equal the recorded ones on at
least 99.9 % of the requests, and so through the Spark replay. The same events replayed
without their tenants (the tenant level unseen) disagree widely, so the test can fail.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.client import NewTopic, SyncAdminClient
from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings, UsageSettings
from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.embedded import TansuBroker
from quotagate.pipeline.quotas import parse_quotas
from quotagate.pipeline.recommend import RecommendOptions, recommend
from quotagate.pipeline.replay import replay
from quotagate.pipeline.replay_core import replay_table
from quotagate.pipeline.report import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.pipeline.sharing import replay_groups
from quotagate.quota import load_quota_file
from quotagate.usage.schema import USAGE_COLUMNS

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


def _produce(bootstrap: str, client_id: str, topic: str, stop: threading.Event) -> None:
    # Small batches: the run holds many produce requests rather than a few large ones.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 4096,
            "queue.buffering.max.messages": 64,
        }
    )
    payload = b"x" * 1000
    while not stop.is_set():
        try:
            producer.produce(topic, payload)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)


def _consume(bootstrap: str, topic: str, stop: threading.Event) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "team-reader",
            "group.id": f"tenant-fid-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 16384,
            "max.partition.fetch.bytes": 16384,
            "message.max.bytes": 16384,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    while not stop.is_set():
        consumer.poll(0.2)
    consumer.close()


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
    broker = start_tansu()
    usage_dir = tmp_path_factory.mktemp("tenant-fidelity") / "usage"
    runtime = QuotaRuntime(
        QuotaSettings(
            super_users=frozenset({"User:ANONYMOUS"}),
            num_partitions=1,
            tenant_mapping_rules=RULES,
            usage=UsageSettings(path=usage_dir, roll_interval_s=3600.0),
        )
    )
    gateway = start_module_gateway(broker.bootstrap, plugins=[QuotaEnforcement(runtime)])
    bootstrap = str(gateway.bootstrap)
    quota_path = usage_dir.parent / "quotas.toml"
    quota_path.write_text(QUOTA_FILE, encoding="utf-8")
    applied = CliRunner().invoke(app, ["quotas", "apply", str(quota_path), "-b", bootstrap])
    assert applied.exit_code == 0, applied.output
    topic = f"tenant-fid-{uuid.uuid4().hex[:8]}"
    with SyncAdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])

    stop = threading.Event()
    workers = [
        threading.Thread(target=_produce, args=(bootstrap, who, topic, stop))
        for who in (*MEMBERS, "solo")
    ]
    workers.append(threading.Thread(target=_consume, args=(bootstrap, topic, stop)))
    for worker in workers:
        worker.start()
    time.sleep(RUN_S)  # the length of the recorded run, not a synchronisation
    stop.set()
    for worker in workers:
        worker.join(120)
    gateway.stop()  # flushes the usage events
    return usage_dir


@pytest.mark.timeout(300)
def test_replay_with_tenant_quotas_reproduces_the_recorded_throttles(recorded: Path) -> None:
    events = ds.dataset(recorded, format="parquet", partitioning="hive").to_table()
    events = events.select(list(USAGE_COLUMNS))
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
    blind = events.set_column(
        events.schema.get_field_index("tenant"), "tenant", pa.array([""] * events.num_rows)
    )
    blind_agreement = _agreement(_replay_by_groups(blind, QUOTA_FILE))
    print(f"replayed without tenants: agreement {blind_agreement:.5f}")
    assert blind_agreement < 0.99, blind_agreement


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_spark_replay_deals_a_tenant_to_one_slot(
    recorded: Path, spark: SparkSession, tmp_path: Path
) -> None:
    summary = replay(spark, recorded, QUOTA_FILE, tmp_path / "replay")
    print(f"spark tenant replay: {summary}")
    assert summary["events"] > 800, summary
    assert summary["agreement_with_recorded"] >= 0.999, summary


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
