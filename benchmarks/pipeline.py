"""Pipeline throughput: every stage on local[2], and replay against a plain Python loop.

    .venv/bin/python benchmarks/pipeline.py --millions 1

Generates N million synthetic events, runs generate, ingest (of request-log lines
rendered from a sample of them), rollup, recommend, replay (open and closed loop) and
report, and prints events/s per stage. The baseline is ``replay_core.replay_frame`` over
all events in this one process: the same engine, the same rules, no Spark.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds

from quotagate.pipeline.generate import GenerateOptions, generate
from quotagate.pipeline.ingest import ingest
from quotagate.pipeline.recommend import RecommendOptions, recommend
from quotagate.pipeline.replay import replay
from quotagate.pipeline.replay_core import replay_frame
from quotagate.pipeline.report import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.pipeline.session import spark_session

CANDIDATE = """
[[quota]]
defaults = ["user"]
producer_byte_rate = 20000
consumer_byte_rate = 150000
request_percentage = 0.2
controller_mutation_rate = 1.0

[[quota]]
defaults = ["client-id"]
producer_byte_rate = 60000
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--millions", type=float, default=1.0, help="events, in millions")
    parser.add_argument("--log-lines", type=int, default=200_000, help="lines for ingest")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--replay-only",
        action="store_true",
        help="only generate, the two replays and the one-process loop (the replay's figures)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the replays and the loop this many times"
    )
    args = parser.parse_args()
    events = int(args.millions * 1_000_000)
    spark = spark_session(args.master, app_name="quotagate-bench")
    figures: dict[str, Any] = {"events": events, "master": args.master}
    with tempfile.TemporaryDirectory(prefix="qg-bench-") as tmp:
        work = Path(tmp)
        ev = work / "events"
        stages: list[tuple[str, int, Callable[[], object]]] = [
            ("generate", events, lambda: generate(spark, GenerateOptions(events), ev)),
            ("ingest", args.log_lines, lambda: _ingest(spark, ev, work, args.log_lines)),
            ("rollup", events, lambda: rollup(spark, ev, work / "rollup")),
            (
                "recommend",
                events,
                lambda: recommend(spark, work / "rollup", work / "rec.toml", RecommendOptions()),
            ),
            ("replay (open loop)", events, lambda: replay(spark, ev, CANDIDATE, work / "open")),
            (
                "replay (closed loop)",
                events,
                lambda: replay(spark, ev, CANDIDATE, work / "closed", closed_loop=True),
            ),
            (
                "report",
                events,
                lambda: report(
                    ReportInputs(work / "rollup", work / "open", work / "rec.toml"),
                    work / "report.html",
                ),
            ),
        ]
        if args.replay_only:
            stages = [s for s in stages if s[0] == "generate" or s[0].startswith("replay")]
        for round_ in range(args.repeat):
            for name, count, run in stages:
                if round_ and not name.startswith("replay"):
                    continue
                before = _tree_cpu()
                seconds = _timed(run)
                cpu = {k: round(v - before.get(k, 0.0), 2) for k, v in _tree_cpu().items()}
                figures[name] = {
                    "seconds": round(seconds, 2),
                    "events_per_s": round(count / seconds),
                    "cpu_seconds": cpu,
                }
                _print_row(name, count, seconds, cpu)
            open_summary = json.loads((work / "open" / "summary.json").read_text())
            core = open_summary["replay_seconds"]
            figures["replay_grouped_only"] = {"seconds": core, "events_per_s": round(events / core)}
            _print_row("  of which grouped replay", events, core)
            frame = _events_frame(ev)
            cpu_before = time.process_time()
            seconds = _timed(lambda f=frame: replay_frame(f, CANDIDATE, closed_loop=False))
            cpu_s = round(time.process_time() - cpu_before, 2)
            figures["python loop"] = {
                "seconds": round(seconds, 2),
                "events_per_s": round(events / seconds),
                "cpu_seconds": cpu_s,
            }
            _print_row("python loop (1 proc)", events, seconds, {"driver": cpu_s})
        if not args.replay_only:
            # The report holds its data to a budget: under 5 MB whatever the traffic (issue 16).
            figures["report_bytes"] = (work / "report.html").stat().st_size
            print(f"report size: {figures['report_bytes']:,} bytes")
        ratio = (
            figures["replay (open loop)"]["events_per_s"] / figures["python loop"]["events_per_s"]
        )
        figures["replay_over_python_loop"] = round(ratio, 2)
        print(f"replay (open loop, Spark local[2]) / python loop: {ratio:.2f}x")
    figures["load_average"] = os.getloadavg()
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*figures["load_average"]))
    spark.stop()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def _print_row(label: str, count: int, seconds: float, cpu: dict[str, float] | None = None) -> None:
    spent = "  cpu s: " + " ".join(f"{k} {v:.2f}" for k, v in cpu.items()) if cpu else ""
    print(f"{label:26s} {count:>10,} events {seconds:8.2f} s {count / seconds:>12,.0f} ev/s{spent}")


def _tree_cpu() -> dict[str, float]:
    """CPU seconds so far of this process (driver), the JVM and Spark's Python workers.

    On a shared machine wall time mostly measures the neighbours; CPU seconds show where
    the stage's own work goes. Linux only (empty elsewhere); processes that already exited
    count only once reaped (their parent's children times).
    """
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents: dict[int, int] = {}
    spent: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        role = "jvm" if b"java" in command.split(b"\0")[0] else "python workers"
        spent[int(entry.name)] = (role, sum(int(f) for f in fields[11:15]) / tick)
    me = os.getpid()
    totals: dict[str, float] = {}
    for pid, (role, seconds) in spent.items():
        ancestor = pid
        while ancestor not in (me, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == me:
            key = "driver" if pid == me else role
            totals[key] = totals.get(key, 0.0) + seconds
    return totals


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _events_frame(path: Path) -> pd.DataFrame:
    return ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pandas()


def _ingest(spark: Any, events: Path, work: Path, lines: int) -> None:
    logs = work / "logs"
    logs.mkdir()
    sample = _events_frame(events).head(lines)
    with (logs / "broker-1.log").open("w") as out:
        for e in sample.itertuples(index=False):
            out.write(_kip673_line(e) + "\n")
    ingest(spark, logs, work / "ingested")


def _kip673_line(e: Any) -> str:
    """A request-log line in the KIP-673 JSON format for one usage event."""
    stamp = pd.Timestamp(int(e.ts_ms) + 1, unit="ms", tz="UTC")
    prefix = stamp.strftime("[%Y-%m-%d %H:%M:%S,") + f"{stamp.microsecond // 1000:03d}] DEBUG "
    body = {
        "requestHeader": {
            "requestApiKey": int(e.api_key),
            "requestApiVersion": int(e.api_version),
            "correlationId": 1,
            "clientId": e.client_id,
        },
        "request": {
            "topicData": [
                {
                    "name": t["topic"],
                    "partitionData": [{"index": 0, "recordsSizeInBytes": t["bytes"]}],
                }
                for t in e.topics
            ]
        },
        "response": {
            "responses": [{"partitions": [{"recordsSizeInBytes": int(e.response_bytes)}]}]
        },
        "connection": f"10.0.0.1:9092-{e.client_host}:1-0",
        "totalTimeMs": 1.0,
        "localTimeMs": int(e.gateway_time_us) / 1000,
        "throttleTimeMs": 0,
        "principal": e.principal,
        "listener": e.listener,
    }
    return prefix + "Completed request:" + json.dumps(body) + " (kafka.request.logger)"


if __name__ == "__main__":
    main()
