"""`quotagate pipeline stream` keeping up with a fleet's usage topic, as a whole command.

    .venv/bin/python benchmarks/pipeline_stream.py --rate 20000 --seconds 60 --trigger-s 5

Starts a one-node Apache Kafka (tests/support/kafka_cluster.py) and the stream job
(`--master local[2]`, processing-time trigger) as its own process with its own JVM, then
publishes generated usage events through the gateway's Kafka usage sink
(``fleet.topic_publisher``, two publishers as two gateways) at RATE events/s for SECONDS.
Printed: the rate reached, the delay from the last event written to the moment the
streamed rollup's summary counts every event (asked: at most 2 x the trigger interval),
the delay of each micro-batch from its rows' newest event to its tables being written,
and CPU seconds per 1 000 events of the stream job's whole process tree and of the
publishing side.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.dataset as ds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from jars import classpath  # noqa: E402

from quotagate.fleet.topic_publisher import TopicPublisher  # noqa: E402
from quotagate.pipeline.generate.job import GenerateOptions, generate  # noqa: E402
from quotagate.pipeline.session import spark_session  # noqa: E402
from quotagate.usage import stream  # noqa: E402
from quotagate.usage.schema import USAGE_COLUMNS  # noqa: E402
from support.kafka_cluster import kafka_cluster  # noqa: E402

_PR_SET_CHILD_SUBREAPER = 36
TOPIC = "quotagate-usage"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--trigger-s", type=float, default=5.0)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="qg-stream-bench-") as tmp:
        work = Path(tmp)
        template = _template_rows(work, 100_000)
        with kafka_cluster(work / "kafka", nodes=1, request_log=False) as kafka:
            out = work / "stream"
            command = [
                str(Path(sys.executable).with_name("quotagate")), "pipeline", "stream",
                kafka.bootstrap(), TOPIC, str(out), "--trigger-s", str(args.trigger_s),
                "--jars", classpath("spark-kafka").replace(os.pathsep, ","),
                "--master", args.master, "--shuffle-partitions", "2", "--quiet",
            ]  # fmt: skip
            gateways = [
                TopicPublisher(kafka.bootstrap(), TOPIC, stream.record, partitions=2)
                for _ in range(2)
            ]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            # Into a file, never a pipe nobody reads: a full pipe stalls the job's logging.
            job_log = (work / "stream.log").open("wb")
            job = subprocess.Popen(
                command, stdout=job_log, stderr=subprocess.STDOUT, start_new_session=True
            )
            _wait_for((out / "checkpoint" / "offsets").exists, 180, "the query")
            sent, sent_at, publish_cpu = _publish(gateways, template, args.rate, args.seconds)
            last_written = time.monotonic()
            for gateway in gateways:
                gateway.close()
            dropped = sum(g.dropped for g in gateways)
            _wait_for(
                lambda: _streamed(out) >= sent - dropped or job.poll() is not None,
                600,
                "every event in the rollup",
            )
            if job.poll() is not None:
                tail = (work / "stream.log").read_text(errors="replace")[-3000:]
                raise SystemExit(f"the stream job ended early:\n{tail}")
            delay = time.monotonic() - last_written
            os.killpg(job.pid, signal.SIGTERM)
            job.wait(60)
            _reap_group(job.pid)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            job_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            batches = sorted(
                int(p.name) for p in (out / "checkpoint" / "commits").iterdir() if p.name.isdigit()
            )
    rate = sent / sent_at
    print(f"published {sent:,} events in {sent_at:.1f} s: {rate:,.0f} events/s, {dropped} dropped")
    print(f"micro-batches: {len(batches)} at a {args.trigger_s:g} s trigger")
    print(
        f"delay, last event written -> counted in the rollup: {delay:.1f} s "
        f"({delay / args.trigger_s:.2f} x the trigger; asked <= 2)"
    )
    print(
        f"CPU per 1 000 events: stream job {1000 * job_cpu / sent:.3f} s "
        f"(process tree, start-up included), publishing {1000 * publish_cpu / sent:.3f} s"
    )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def _template_rows(work: Path, count: int) -> list[tuple[object, ...]]:
    spark = spark_session("local[2]", shuffle_partitions=2)
    generate(spark, GenerateOptions(events=count, seed=3, users=30, duration_s=3600), work / "ev")
    spark.stop()
    table = ds.dataset(work / "ev", format="parquet", partitioning="hive").to_table(
        columns=list(USAGE_COLUMNS)
    )
    rows = []
    for event in table.to_pylist():
        event["topics"] = [(t["topic"], t["bytes"]) for t in event["topics"] or []]
        rows.append(tuple(event[name] for name in USAGE_COLUMNS))
    return rows


def _publish(
    gateways: list[TopicPublisher], template: list[tuple[object, ...]], rate: int, seconds: int
) -> tuple[int, float, float]:
    """Events stamped with the wall clock as they are written, paced to ``rate``; returns
    (events, seconds, CPU seconds of this process while publishing)."""
    cpu_before = time.process_time()
    started = time.monotonic()
    sent = 0
    tick = 0.05
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(rate * elapsed) + int(rate * tick)
        now_ms = time.time_ns() // 1_000_000
        while sent < due:
            row = template[sent % len(template)]
            gateways[sent % 2].add((now_ms, *row[1:]))
            sent += 1
        for gateway in gateways:
            gateway.flush()
        time.sleep(tick)
    return sent, time.monotonic() - started, time.process_time() - cpu_before


def _streamed(out: Path) -> int:
    try:
        return int(json.loads((out / "rollup" / "summary.json").read_text())["events"])
    except (OSError, ValueError, KeyError):
        return 0


def _wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def _reap_group(group: int, timeout_s: float = 60.0) -> None:
    """Wait for every process of the job's group, its JVM included (ours to reap as the
    subreaper once the job's own process is gone), so its CPU time is counted; SIGKILL what
    is left after ``timeout_s``. Only that group: Kafka's broker is a child of ours too."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pid, _ = os.waitpid(-group, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.1)


if __name__ == "__main__":
    main()
