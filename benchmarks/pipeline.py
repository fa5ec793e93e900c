"""Pipeline throughput: every stage on local[1] and local[2] in one run, events per
CPU-second and per wall second, and replay against a plain Python loop.

    .venv/bin/python benchmarks/pipeline.py --millions 0.5 --log-lines 200000

Generates N million synthetic events and renders request-log lines (KIP-673 JSON) from a
sample of them, then runs ingest, rollup, recommend, replay (open and closed loop) and
report once per master, and the old ingest (the Python parser in ``mapInArrow``) on the
same lines, checking both ingests wrote identical events. CPU seconds are those of the
whole process tree (driver, JVM, Spark's Python workers), so they hold under a machine's
other load where wall time does not. The replay baseline is ``replay_core.replay_frame``
over all events in this one process: the same engine, the same rules, no Spark.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from quotagate.pipeline.generate.job import GenerateOptions, generate
from quotagate.pipeline.ingest.job import gateway_of, ingest, parse_line, write_parsed
from quotagate.pipeline.recommend.job import RecommendOptions, recommend
from quotagate.pipeline.replay.core import replay_frame
from quotagate.pipeline.replay.job import replay
from quotagate.pipeline.report.job import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.pipeline.session import spark_session
from quotagate.usage.schema import USAGE_SCHEMA

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
    parser.add_argument("--millions", type=float, default=0.5, help="events, in millions")
    parser.add_argument("--log-lines", type=int, default=200_000, help="lines for ingest")
    parser.add_argument(
        "--masters",
        default="local[1],local[2]",
        help="comma-separated Spark masters, each run through every stage in this one run",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--replay-only",
        action="store_true",
        help="only generate, replay (open and closed loop) and the one-process loop",
    )
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="only generate, render the logs, ingest and the old parser's ingest",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every stage this many times per master; the figures are the last run's",
    )
    parser.add_argument(
        "--no-python-ingest",
        action="store_true",
        help="skip the old ingest (Python parser in mapInArrow) run for comparison",
    )
    args = parser.parse_args()
    events = int(args.millions * 1_000_000)
    masters = args.masters.split(",")
    jvm_options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "TieredStopAtLevel" in jvm_options:
        # The test suite's C1-only JVM is much slower on large inputs: not the product's.
        parser.error(f"SPARK_SUBMIT_OPTS={jvm_options!r} limits the JIT; unset it")
    figures: dict[str, Any] = {"events": events, "log_lines": args.log_lines, "masters": {}}
    with tempfile.TemporaryDirectory(prefix="qg-bench-") as tmp:
        work = Path(tmp)
        ev = work / "events"
        logs = work / "logs"
        for index, master in enumerate(masters):
            spark = spark_session(master, app_name="quotagate-bench")
            print(f"--- {master}")
            run = work / master.replace("[", "-").replace("]", "")
            stages = _stages(spark, args, ev, logs, run, first=index == 0)
            measured: dict[str, Any] = {}
            for name, count, stage in stages:
                once = name in ("generate", "render logs")
                for _ in range(1 if once else args.repeat):
                    measured[name] = _measure(name, count, stage)
            if not (args.no_python_ingest or args.replay_only):
                same = _same_events(run / "ingested", run / "ingested-python")
                measured["ingest_identical_events"] = same
                print(f"ingest and the old parser's ingest wrote identical events: {same}")
            figures["masters"][master] = measured
            spark.stop()
        frame = _events_frame(ev)
        for _ in range(0 if args.ingest_only else args.repeat):
            cpu_before = time.process_time()
            seconds = _timed(lambda f=frame: replay_frame(f, CANDIDATE, closed_loop=False))
            cpu_s = time.process_time() - cpu_before
        if not args.ingest_only:
            figures["python loop"] = {
                "seconds": round(seconds, 2),
                "events_per_s": round(events / seconds),
                "events_per_cpu_s": round(events / cpu_s),
            }
            _print_row("python loop (1 proc)", events, seconds, {"driver": round(cpu_s, 2)})
    _print_summary(figures, masters)
    figures["load_average"] = os.getloadavg()
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*figures["load_average"]))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


Stage = tuple[str, int, Callable[[], object]]


def _stages(
    spark: Any, args: argparse.Namespace, ev: Path, logs: Path, run: Path, *, first: bool
) -> list[Stage]:
    events = int(args.millions * 1_000_000)
    stages: list[Stage] = []
    if first:
        stages.append(("generate", events, lambda: generate(spark, GenerateOptions(events), ev)))
        if not args.replay_only:
            stages.append(
                ("render logs", args.log_lines, lambda: _render(ev, logs, args.log_lines))
            )
    replays: list[Stage] = [
        ("replay (open loop)", events, lambda: replay(spark, ev, CANDIDATE, run / "open")),
        (
            "replay (closed loop)",
            events,
            lambda: replay(spark, ev, CANDIDATE, run / "closed", closed_loop=True),
        ),
    ]
    if args.replay_only:
        return stages + replays
    old_ingest: Stage = (
        "ingest, old Python parser",
        args.log_lines,
        lambda: _python_ingest(spark, logs, run / "ingested-python"),
    )
    if args.ingest_only:
        stages.append(("ingest", args.log_lines, lambda: ingest(spark, logs, run / "ingested")))
        return stages if args.no_python_ingest else [*stages, old_ingest]
    stages += [
        ("ingest", args.log_lines, lambda: ingest(spark, logs, run / "ingested")),
        ("rollup", events, lambda: rollup(spark, ev, run / "rollup")),
        (
            "recommend",
            events,
            lambda: recommend(spark, run / "rollup", run / "rec.toml", RecommendOptions()),
        ),
        *replays,
        (
            "report",
            events,
            lambda: report(
                ReportInputs(run / "rollup", run / "open", run / "rec.toml"), run / "report.html"
            ),
        ),
    ]
    if not args.no_python_ingest:
        stages.append(old_ingest)
    return stages


def _measure(name: str, count: int, stage: Callable[[], object]) -> dict[str, Any]:
    before = _tree_cpu()
    seconds = _timed(stage)
    cpu = {k: round(v - before.get(k, 0.0), 2) for k, v in _tree_cpu().items()}
    cpu = {k: v for k, v in cpu.items() if v > 0}
    total = sum(cpu.values())
    _print_row(name, count, seconds, cpu)
    return {
        "seconds": round(seconds, 2),
        "events_per_s": round(count / seconds),
        "cpu_seconds": cpu,
        "events_per_cpu_s": round(count / total) if total else None,
    }


def _print_summary(figures: dict[str, Any], masters: list[str]) -> None:
    """Per stage: events per CPU-second and per wall second on every master, and the wall
    time scaling from the first master to the last, all from this one run."""
    runs = [figures["masters"][m] for m in masters]
    names = [n for n in runs[-1] if isinstance(runs[-1][n], dict)]
    header = " | ".join(f"{m} ev/CPU-s | {m} ev/s" for m in masters)
    print(f"\n| stage | {header} | {masters[0]} -> {masters[-1]} |")
    for name in names:
        cells = []
        for run in runs:
            stage = run.get(name)
            cells.append(
                f"{stage['events_per_cpu_s']:,} | {stage['events_per_s']:,}" if stage else "- | -"
            )
        first, last = runs[0].get(name), runs[-1].get(name)
        scaling = f"{first['seconds'] / last['seconds']:.2f}x" if first and last else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {scaling} |")
    loop = figures["python loop"]["events_per_s"] if "python loop" in figures else None
    for master, run in zip(masters, runs, strict=True) if loop else ():
        for mode in ("open loop", "closed loop"):
            ratio = run[f"replay ({mode})"]["events_per_s"] / loop
            print(f"replay ({mode}) on {master} / one-process loop (open): {ratio:.2f}x")
    if "ingest, old Python parser" in runs[-1]:
        speedup = (
            runs[-1]["ingest"]["events_per_s"]
            / runs[-1]["ingest, old Python parser"]["events_per_s"]
        )
        print(f"ingest on {masters[-1]} / old Python parser's ingest, lines/s: {speedup:.1f}x")


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


def _render(events: Path, logs: Path, lines: int) -> None:
    logs.mkdir()
    sample = _events_frame(events).head(lines)
    with (logs / "broker-1.log").open("w") as out:
        for e in sample.itertuples(index=False):
            out.write(_kip673_line(e) + "\n")


def _python_ingest(spark: Any, logs: Path, out: Path) -> None:
    """The ingest as it was before the JVM parser: every line through ``parse_line`` in a
    Python worker (``mapInArrow``), then the very write ``ingest`` does (``write_parsed``)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415
    from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415

    parsed_schema = pa.schema(
        [*USAGE_SCHEMA, ("status", pa.string()), ("reason", pa.string()), ("line", pa.string())]
    )

    def parse(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            texts, names = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            rows = [parse_line(t, gateway_of(n)) for t, n in zip(texts, names, strict=True)]
            yield pa.RecordBatch.from_pylist(rows, schema=parsed_schema)

    lines = spark.read.text(str(logs)).withColumn("file", F.input_file_name())
    parsed = lines.mapInArrow(parse, from_arrow_schema(parsed_schema))
    # The same write as ``ingest``: events without a shuffle, buckets and samples observed.
    write_parsed(parsed, out, logs, 1)


def _same_events(jvm: Path, python: Path) -> bool:
    frames = []
    for path in (jvm, python):
        frame = _events_frame(path)
        frame["topics"] = frame["topics"].map(lambda t: repr([tuple(x.values()) for x in t]))
        frames.append(frame.sort_values(list(frame.columns), ignore_index=True))
    return bool(frames[0].equals(frames[1]))


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
