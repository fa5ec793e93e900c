"""generate, ingest, rollup and recommend on the shared SparkSession."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.events import check_usage_dataset, read_usage
from quotagate.pipeline.ingest.job import REPORT_NAME, ingest
from quotagate.pipeline.recommend.job import RecommendOptions, recommend
from quotagate.pipeline.replay.job import replay
from quotagate.pipeline.rollup import rollup
from quotagate.pipeline.sharing import replay_groups, resolve_pairs
from quotagate.quota import load_quota_file
from quotagate.usage.schema import USAGE_COLUMNS

from .conftest import CANDIDATE_QUOTAS, FIXTURES

pytestmark = pytest.mark.spark


def _events(path: Path) -> pd.DataFrame:
    return ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pandas()


def test_generated_events_follow_the_schema_and_the_population(events_dir: Path) -> None:
    check_usage_dataset(events_dir)
    events = _events(events_dir)
    assert len(events) == 60_000
    start = 1_704_067_200_000
    assert events["ts_ms"].between(start, start + 4 * 3600 * 1000 - 1).all()
    hours = pd.to_datetime(events["ts_ms"], unit="ms").dt.hour
    assert (hours.astype(str).str.zfill(2) == events["hour"].astype(str).str.zfill(2)).all()
    assert {0, 1, 19}.issubset(set(events["api_key"]))
    per_client = events.groupby("client_id").size()
    # heavy tail: the busiest tenth of clients carry most of the traffic
    top = per_client.nlargest(max(1, len(per_client) // 10)).sum()
    assert top / len(events) > 0.4
    assert (events.loc[events["api_key"] == 19, "partition_mutations"] > 0).all()


def test_ingest_counts_every_line(spark: SparkSession, tmp_path: Path) -> None:
    report = ingest(spark, FIXTURES / "logs", tmp_path / "events")
    assert (report["lines"], report["events"], report["failed"], report["other"]) == (18, 11, 4, 3)
    assert {s["reason"].split(":")[0] for s in report["failed_samples"]} >= {"invalid JSON"}
    saved = json.loads((tmp_path / "events" / REPORT_NAME).read_text())
    assert saved["failed"] == 4
    frame = read_usage(spark, tmp_path / "events").toPandas()
    assert list(frame.columns) == list(USAGE_COLUMNS)
    assert sorted(frame["gateway_id"].unique()) == ["broker-1-kafka-2.7", "broker-2-kafka-3.7"]
    assert frame["partition_mutations"].sum() == 6 + 1 + 11 + 2


def test_ingest_of_nothing_parseable_is_an_error(spark: SparkSession, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("[2024-01-01 00:00:00,000] INFO started (kafka.Kafka)\n")
    with pytest.raises(PipelineError, match="no request-log line"):
        ingest(spark, logs, tmp_path / "out")
    with pytest.raises(PipelineError, match="empty directory"):
        ingest(spark, _empty(tmp_path), tmp_path / "o2")


def _empty(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def test_bad_usage_tables_get_one_readable_sentence(tmp_path: Path, events_dir: Path) -> None:
    with pytest.raises(PipelineError, match="empty directory"):
        check_usage_dataset(_empty(tmp_path))
    with pytest.raises(PipelineError, match="does not exist"):
        check_usage_dataset(tmp_path / "missing")
    table = _events(events_dir).head(10).drop(columns=["date", "hour"])
    wrong = pa.Table.from_pandas(table.assign(api_key=table["api_key"].astype("int64"), extra=1))
    (tmp_path / "wrong").mkdir()
    pq.write_table(wrong, tmp_path / "wrong" / "part.parquet")
    with pytest.raises(PipelineError) as error:
        check_usage_dataset(tmp_path / "wrong")
    assert "column 'api_key' has type int64, expected int16" in str(error.value)
    # A column the schema does not name (a newer gateway's) is no problem, and not read.
    assert "extra" not in str(error.value)
    events = ds.dataset(str(events_dir), format="parquet", partitioning="hive").head(10)
    events = events.select(list(USAGE_COLUMNS))
    newer = events.append_column("a_newer_gateways_column", pa.array(["x"] * 10)).append_column(
        "and_another", pa.array([0] * 10, pa.int32())
    )
    (tmp_path / "newer").mkdir()
    pq.write_table(newer, tmp_path / "newer" / "part.parquet")
    check_usage_dataset(tmp_path / "newer")


def test_events_written_before_the_shadow_column_still_read(
    spark: SparkSession, tmp_path: Path, events_dir: Path
) -> None:
    """``shadow_throttle_ms`` came later: a table without it is read with it null."""
    events = ds.dataset(str(events_dir), format="parquet", partitioning="hive").head(10)
    (tmp_path / "old").mkdir()
    old = events.drop_columns(["date", "hour", "shadow_throttle_ms"])
    pq.write_table(old, tmp_path / "old" / "part.parquet")
    check_usage_dataset(tmp_path / "old")
    frame = read_usage(spark, tmp_path / "old").toPandas()
    assert list(frame.columns) == list(USAGE_COLUMNS)
    assert frame["shadow_throttle_ms"].isna().all() and len(frame) == 10


def test_requests_before_authentication_in_older_files_are_left_out(
    spark: SparkSession, tmp_path: Path, events_dir: Path
) -> None:
    """Gateways before issue 36 wrote a SASL client's ApiVersions before it authenticated with
    principal "": read_usage leaves them out, as the gateway's quotas and Kafka's request log
    do, so rollup, replay and report never show a principal nobody has."""
    events = ds.dataset(str(events_dir), format="parquet", partitioning="hive").head(10)
    principals = events["principal"].to_pylist()
    anonymous = pa.array(["" if i % 3 == 0 else p for i, p in enumerate(principals)])
    older = events.drop_columns(["date", "hour"])
    older = older.set_column(older.schema.get_field_index("principal"), "principal", anonymous)
    (tmp_path / "older").mkdir()
    pq.write_table(older, tmp_path / "older" / "part.parquet")
    frame = read_usage(spark, tmp_path / "older").toPandas()
    assert len(frame) == 6 and "" not in set(frame["principal"])


def test_sharing_keys_and_groups_come_from_the_engine() -> None:
    quota_file = load_quota_file(CANDIDATE_QUOTAS)
    pairs = [("User:a", "c1"), ("User:b", "c1"), ("User:c", "c2"), ("User:svc-001", "x")]
    resolved = {(r.principal, r.quota_type): r for r in resolve_pairs(quota_file, pairs)}
    # produce has user and client-id defaults: the user level wins (spec §3.4 level 6 < 8)
    assert (
        resolved["User:a", "produce"].share_user,
        resolved["User:a", "produce"].share_client,
    ) == ("a", "")
    assert resolved["User:svc-001", "produce"].limit == 4000
    assert resolved["User:a", "fetch"].limit == 150000
    groups = replay_groups(quota_file, pairs)
    assert len(set(groups.values())) == 4  # every user its own bucket for every type
    shared = '[[quota]]\ndefaults = ["client-id"]\nconsumer_byte_rate = 1000\n'
    groups = replay_groups(load_quota_file(shared), pairs)
    assert groups["User:a", "c1"] == groups["User:b", "c1"] != groups["User:c", "c2"]


def test_rollup_totals_match_the_events_and_recommend_writes_a_quota_file(
    spark: SparkSession, events_dir: Path, tmp_path: Path
) -> None:
    summary = rollup(spark, events_dir, tmp_path / "rollup")
    assert summary["events"] == 60_000
    events = _events(events_dir)
    windows = pd.read_parquet(tmp_path / "rollup" / "windows")
    produce = windows[windows["quota_type"] == "produce"]
    assert produce["value"].sum() == events.loc[events["api_key"] == 0, "request_bytes"].sum()
    mutations = windows[windows["quota_type"] == "controller_mutation"]["value"].sum()
    assert mutations == events["partition_mutations"].sum()
    per_user = produce.groupby("entity_user")["value"].sum()
    users = events[events["api_key"] == 0].assign(u=events["principal"].str.split(":").str[1])
    expected = users.groupby("u")["request_bytes"].sum()
    pd.testing.assert_series_equal(
        per_user.sort_index(), expected.sort_index().astype(float), check_names=False
    )
    topics = pd.read_parquet(tmp_path / "rollup" / "topics")
    assert topics["bytes"].sum() == events["topics"].map(lambda t: sum(x["bytes"] for x in t)).sum()
    entities = pd.read_parquet(tmp_path / "rollup" / "entities")
    assert (entities["p99_rate"] <= entities["max_rate"] + 1e-9).all()

    out = tmp_path / "recommended.toml"
    result = recommend(spark, tmp_path / "rollup", out, RecommendOptions(percentile=95, headroom=2))
    quota_file = load_quota_file(out.read_text())
    assert result["entities"] == len(quota_file.entries)
    assert quota_file.gateway["controller.quota.window.num"] >= 11
    table = pd.read_parquet(tmp_path / "recommended.recommendations.parquet")
    assert (table["recommended"] >= table["observed"] * 2 - 1e-6).all()
    defaults = [e for e in quota_file.entries if e.entity == {"user": None}]
    assert len(defaults) == 1
    named = {e.entity["user"]: e.config for e in quota_file.entries if e.entity.get("user")}
    assert set(named) == set(table["entity_user"])


def test_rollup_with_a_single_quota_window_has_a_sustained_rate(
    spark: SparkSession, events_dir: Path, tmp_path: Path
) -> None:
    """quota.window.num = 1 is legal Kafka: no earlier windows, so the window stands alone."""
    quotas = '[gateway]\n"quota.window.num" = 1\n\n[[quota]]\ndefaults = ["user"]\n'
    quotas += "producer_byte_rate = 1000\n"
    rollup(spark, events_dir, tmp_path, quota_text=quotas)
    windows = pd.read_parquet(tmp_path / "windows")
    assert windows["sustained_rate"].notna().all()
    pd.testing.assert_series_equal(windows["sustained_rate"], windows["rate"], check_names=False)


def test_replay_of_an_empty_quota_file_throttles_nothing(
    spark: SparkSession, events_dir: Path, tmp_path: Path
) -> None:
    summary = replay(spark, events_dir, "", tmp_path)
    assert summary["events"] == 60_000
    assert summary["throttled_requests"] == 0
    shutil.rmtree(tmp_path)
