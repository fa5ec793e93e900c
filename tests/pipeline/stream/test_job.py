"""Usage as a stream, end to end on the suite's Kafka: two gateways' usage publishers feed
one topic; ``quotagate pipeline stream`` (Spark's own Kafka connector) keeps the rollup;
killed with SIGKILL mid-way and restarted from its checkpoint on a standalone Spark cluster,
it writes the same tables as the batch rollup of the same events; recommend and report read
what it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds
import pytest
from jars import JarsMissingError, classpath
from pyspark.sql import SparkSession

from quotagate.fleet.topic_publisher import TopicPublisher
from quotagate.pipeline.generate.job import GenerateOptions, generate
from quotagate.pipeline.recommend.job import RecommendOptions, recommend
from quotagate.pipeline.report.job import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.usage import stream
from quotagate.usage.schema import USAGE_COLUMNS
from support.kafka_cluster import KafkaCluster

from ..standalone import Cluster

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

EVENTS = 6_000
BATCH_RECORDS = 1_500  # four micro-batches or more: room to be killed after the first


def _connector_jars() -> str:
    try:
        return classpath("spark-kafka").replace(os.pathsep, ",")
    except JarsMissingError as exc:
        pytest.fail(str(exc))


def _rows(events: Path) -> list[tuple[Any, ...]]:
    """The events as the gateway hands them to its sink, in arrival (event-time) order."""
    table = ds.dataset(events, format="parquet", partitioning="hive").to_table(
        columns=list(USAGE_COLUMNS)
    )
    rows = []
    for event in sorted(table.to_pylist(), key=lambda e: e["ts_ms"]):
        event["topics"] = [(t["topic"], t["bytes"]) for t in event["topics"] or []]
        rows.append(tuple(event[name] for name in USAGE_COLUMNS))
    return rows


def _publish(kafka: KafkaCluster, topic: str, rows: list[tuple[Any, ...]]) -> None:
    """Two gateways, each with its own publisher, share the events and the topic."""
    gateways = [
        TopicPublisher(kafka.bootstrap(), topic, stream.record, client_id=f"g{i}", partitions=3)
        for i in range(2)
    ]
    for index, row in enumerate(rows):
        assert gateways[index % 2].add(row)
    for gateway in gateways:
        gateway.close()
    assert sum(g.written for g in gateways) == len(rows)
    assert sum(g.dropped for g in gateways) == 0


def _stream_command(
    kafka: KafkaCluster, topic: str, out: Path, *extra: str, master: str = "local[2]"
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "quotagate",
        "pipeline",
        "stream",
        kafka.bootstrap(),
        topic,
        str(out),
        "--available-now",
        "--watermark-s",
        "3600",
        "--jars",
        _connector_jars(),
        "--master",
        master,
        "--shuffle-partitions",
        "2",
        "--driver-memory",
        "1g",
        "--quiet",
        *extra,
    ]


def _run(command: list[str], explain: Callable[[], str] = str) -> None:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # A cluster's driver binds where the operator says; this cluster is on loopback.
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert done.returncode == 0, done.stderr[-3000:] + explain()


def _killed_after_first_batch(command: list[str], out: Path) -> None:
    """Start the job and SIGKILL it (JVM included) once its first batch is committed."""
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    commits = out / "checkpoint" / "commits"
    deadline = time.monotonic() + 240
    while not (commits / "0").exists():
        assert process.poll() is None, (
            process.stderr.read().decode()[-3000:] if process.stderr else ""
        )
        assert time.monotonic() < deadline, "no micro-batch committed in 240 s"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)
    committed = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    offsets = sorted(
        int(p.name) for p in (out / "checkpoint" / "offsets").iterdir() if p.name.isdigit()
    )
    # Killed mid-way: the last batch at least remained for the restart.
    assert committed[-1] < EVENTS // BATCH_RECORDS - 1, (committed, offsets)


def _windows(rollup_dir: Path) -> pd.DataFrame:
    frame = pd.read_parquet(rollup_dir / "windows")
    keys = ["quota_type", "share_user", "share_client", "window_start_ms"]
    columns = [*keys, "requests", "value", "throttle_ms", "throttled_requests"]
    frame = frame[columns].sort_values(keys, ignore_index=True)
    # Request time is a float sum whose order differs by plan; counts and bytes are exact.
    frame.loc[frame.quota_type == "request", "value"] = frame.value.round(6)
    return frame


def _topics(rollup_dir: Path) -> pd.DataFrame:
    frame = pd.read_parquet(rollup_dir / "topics")[["topic", "window_start_ms", "bytes"]]
    return frame.sort_values(["topic", "window_start_ms"], ignore_index=True)


def test_a_killed_stream_resumed_on_a_cluster_equals_the_batch_rollup(
    spark: SparkSession, kafka: KafkaCluster, spark_cluster: Cluster, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    generate(spark, GenerateOptions(events=EVENTS, seed=5, users=6, duration_s=1800), events)
    rows = _rows(events)
    assert len(rows) == EVENTS
    topic = f"usage-{uuid.uuid4().hex[:8]}"
    _publish(kafka, topic, rows)

    batch = rollup(spark, events, tmp_path / "batch")
    out = tmp_path / "stream"
    command = _stream_command(kafka, topic, out, "--max-offsets-per-trigger", str(BATCH_RECORDS))
    _killed_after_first_batch(command, out)
    # Restarted from its checkpoint on a standalone cluster, where what remains is one
    # micro-batch on its executors. No separate uninterrupted run: equal to the batch rollup
    # says the same, and each run on the cluster costs about 70 s of this 2-core machine.
    before = spark_cluster.executors()
    _run(_stream_command(kafka, topic, out, master=spark_cluster.url), spark_cluster.explain)
    assert len(spark_cluster.executors() - before) == 2, spark_cluster.explain()

    expected_windows = _windows(tmp_path / "batch")
    assert int(expected_windows[expected_windows.quota_type == "request"].requests.sum()) > 0
    pd.testing.assert_frame_equal(_windows(out / "rollup"), expected_windows)
    pd.testing.assert_frame_equal(_topics(out / "rollup"), _topics(tmp_path / "batch"))
    summary = json.loads((out / "rollup" / "summary.json").read_text())
    assert summary["events"] == batch["events"] == EVENTS

    recommendation = tmp_path / "recommended.toml"
    recommended = recommend(spark, out / "rollup", recommendation, RecommendOptions(99.0, 1.5))
    assert recommended and recommendation.read_text().count("[[quota]]") >= 1
    html = report(ReportInputs(out / "rollup", recommendation=recommendation), tmp_path / "r.html")
    assert html.stat().st_size > 10_000
