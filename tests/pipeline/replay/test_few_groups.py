"""Replays with fewer replay groups than Spark partitions: a cluster of a handful of
principals, one principal, a skewed pair, a few dozen events. Some partitions then get no
row at all, which every function Spark maps over partitions must take in its stride."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.replay.core import ORDER_COLUMNS, replay_frame
from quotagate.pipeline.replay.job import replay
from quotagate.pipeline.sharing import replay_groups
from quotagate.quota import load_quota_file
from quotagate.usage.schema import USAGE_SCHEMA

from ..conftest import CANDIDATE_QUOTAS

pytestmark = pytest.mark.spark
PREDICTED = ["replay_ts_ms", "predicted_throttle_ms", "predicted_cause", "predicted_error_code",
             "delay_ms"]  # fmt: skip


# More replay tasks than the test session's two cores: some get no group at all.
SLOTS = 4


def _events(events_dir: Path) -> pd.DataFrame:
    table = ds.dataset(str(events_dir), format="parquet", partitioning="hive").to_table()
    return table.select(USAGE_SCHEMA.names).to_pandas()


def _write(frame: pd.DataFrame, path: Path) -> Path:
    path.mkdir(parents=True)
    table = pa.Table.from_pandas(frame.reset_index(drop=True), schema=USAGE_SCHEMA)
    pq.write_table(table, path / "part-0.parquet")
    return path


def _single_principal(events: pd.DataFrame) -> pd.DataFrame:
    busiest = events["principal"].value_counts().index[0]
    return events[events["principal"] == busiest]


def _skewed(events: pd.DataFrame) -> pd.DataFrame:
    """Two principals, one with 50 times the other's events."""
    big, small = events["principal"].value_counts().index[:2]
    minor = events[events["principal"] == small].head(
        max(1, (events["principal"] == big).sum() // 50)
    )
    return pd.concat([events[events["principal"] == big], minor])


def _tiny(events: pd.DataFrame) -> pd.DataFrame:
    return _single_principal(events).head(40)


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    columns = [*ORDER_COLUMNS, *PREDICTED]
    return frame[columns].sort_values(columns, ignore_index=True).astype(
        {c: "int64" for c in columns if c not in ("principal", "client_id", "client_host",
                                                  "predicted_cause")}
    )  # fmt: skip


@pytest.mark.parametrize("shape", [_single_principal, _skewed, _tiny])
@pytest.mark.parametrize("closed_loop", [False, True])
def test_replay_with_fewer_groups_than_partitions_equals_one_process(
    spark: SparkSession,
    events_dir: Path,
    tmp_path: Path,
    shape: object,
    closed_loop: bool,
) -> None:
    assert callable(shape)
    events = shape(_events(events_dir))
    pairs = set(zip(events["principal"], events["client_id"], strict=True))
    groups = set(replay_groups(load_quota_file(CANDIDATE_QUOTAS), pairs).values())
    assert len(groups) < SLOTS, "the data set must leave a slot without a group"

    summary = replay(
        spark, _write(events, tmp_path / "events"), CANDIDATE_QUOTAS, tmp_path / "out",
        closed_loop=closed_loop, slots=SLOTS,
    )  # fmt: skip
    assert summary["events"] == len(events)
    replayed = pd.read_parquet(tmp_path / "out" / "requests")
    single = replay_frame(events, CANDIDATE_QUOTAS, closed_loop=closed_loop)
    pd.testing.assert_frame_equal(_canonical(replayed), _canonical(single))
    entities = pd.read_parquet(tmp_path / "out" / "entities")
    assert entities["requests"].sum() == len(events)
    assert entities["throttled_requests"].sum() == (single["predicted_throttle_ms"] > 0).sum()
