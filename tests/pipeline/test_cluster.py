"""``quotagate pipeline all --logs`` end to end, as a user runs it: on ``local[2]`` and on a
real Spark standalone cluster (a master and two workers on loopback), from the request logs
of two principals (one broker writing Kafka 2.x text lines, one KIP-673 JSON lines), with
the CLI's defaults (4 shuffle partitions, one replay task per core). Both runs must write
the same tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds
import pytest

from .request_logs import Broker, write_logs
from .standalone import Cluster

pytestmark = pytest.mark.spark
LINES_PER_BROKER = 3_000
# Figures that measure the run rather than the traffic.
_TIMINGS = ("replay_seconds", "events_per_second")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    brokers = [
        Broker("broker-1", json_format=False, principals=("User:alice",)),
        Broker("broker-2", json_format=True, principals=("User:bob",)),
    ]
    return write_logs(tmp_path_factory.mktemp("logs"), brokers, lines=LINES_PER_BROKER, seed=11)


def _pipeline_all(out: Path, logs: Path, master: str) -> subprocess.CompletedProcess[str]:
    quotagate = Path(sys.executable).with_name("quotagate")
    command = [str(quotagate), "pipeline", "all", str(out), "--logs", str(logs)]
    return subprocess.run(
        [*command, "--master", master, "--driver-memory", "1g", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
        # A cluster's driver binds where the operator says; this cluster is on loopback.
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )


@pytest.fixture(scope="module")
def local_run(logs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    result = _pipeline_all(out, logs, "local[2]")
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _table(path: Path) -> pd.DataFrame:
    frame = ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pandas()
    frame = frame.drop(columns=[c for c in ("date", "hour") if c in frame.columns])
    # Nested lists are not orderable: compare them as text.
    for column in frame.columns:
        if frame[column].dtype == object and frame[column].map(_nested).any():
            frame[column] = frame[column].map(lambda v: json.dumps(_plain(v), sort_keys=True))
    return frame.sort_values(list(frame.columns), ignore_index=True)


def _nested(value: Any) -> bool:
    return not isinstance(value, str | bytes) and value is not None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _summary(path: Path) -> dict[str, Any]:
    summary = json.loads(path.read_text())
    return {k: v for k, v in summary.items() if k not in _TIMINGS}


def test_pipeline_all_from_two_principals_request_logs_on_local(local_run: Path) -> None:
    report = json.loads((local_run / "events" / "_ingest_report.json").read_text())
    assert report["files"] == 2
    assert report["lines"] == 2 * LINES_PER_BROKER
    assert report["failed"] > 0 and report["other"] > 0
    events = _table(local_run / "events")
    assert len(events) == report["events"]
    assert set(events["principal"]) == {"User:alice", "User:bob"}
    assert events["client_id"].nunique() >= 10
    recommended = (local_run / "recommended-quotas.toml").read_text()
    assert 'user = "alice"' in recommended and 'user = "bob"' in recommended
    replayed = _summary(local_run / "replay" / "summary.json")
    assert replayed["events"] == len(events)
    assert len(_table(local_run / "replay" / "requests")) == len(events)
    assert (local_run / "report.html").stat().st_size > 0


def test_pipeline_all_on_a_standalone_cluster_equals_local(
    logs: Path, local_run: Path, tmp_path: Path, spark_cluster: Cluster
) -> None:
    out = tmp_path / "out"
    before = spark_cluster.executors()
    result = _pipeline_all(out, logs, spark_cluster.url)
    assert result.returncode == 0, result.stdout + result.stderr + spark_cluster.explain()
    # The work ran on the workers' executors, not in the driver.
    assert len(spark_cluster.executors() - before) == 2, spark_cluster.explain()
    for table in (
        "events", "rollup/windows", "rollup/topics", "rollup/entities",
        "replay/requests", "replay/entities", "replay/heatmap",
    ):  # fmt: skip
        pd.testing.assert_frame_equal(_table(out / table), _table(local_run / table), obj=table)
    for name in ("events/_ingest_report.json", "rollup/summary.json", "replay/summary.json"):
        assert _summary(out / name) == _summary(local_run / name), name
    recommended = "recommended-quotas.toml"
    assert (out / recommended).read_text() == (local_run / recommended).read_text()
