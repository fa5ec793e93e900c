"""``ingest``: Kafka broker request logs (text or KIP-673 JSON) to usage events.

Every input line ends in exactly one bucket: ``ok`` (became an event), ``error`` (a
request-log line that did not parse) or ``other`` (not a request-log line: other loggers,
stack-trace continuations; or the controller's copy of a request a broker forwarded to it).
Counts and samples of the last two go into the job report; nothing is dropped silently.

Mapping to the usage schema: the event time is the log time minus ``totalTime`` (usage
events stamp when a request was read); ``gateway_time_us`` is ``localTime``, the I/O-thread
time KIP-124 charges (the log does not split out network-thread time); remote time is
purgatory time and never charged, so ``upstream_time_us`` is 0. Request logs carry no frame
sizes: produce bytes are the record bytes, fetch bytes the records returned.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator
from datetime import UTC, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.events import write_usage
from quotagate.pipeline.ingest.reference import gateway_of, parse_line
from quotagate.pipeline.ingest.samples import SAMPLE_BUCKETS, SAMPLES, spark_bucket
from quotagate.pipeline.tables import write_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPORT_NAME: Final = "_ingest_report.json"
__all__ = ["REPORT_NAME", "gateway_of", "ingest", "parse_line", "write_parsed"]

_STATUSES: Final = ("ok", "error", "other")


def ingest(
    spark: SparkSession, logs: str | Path, out: str | Path, *, tz: timezone = UTC
) -> dict[str, Any]:
    """Parse every line under ``logs`` and write events under ``out`` (+ the report).

    One task per core (``defaultParallelism``), each dealt pieces of the log files; each
    task's Python worker reads its pieces itself, parses them with whole-array kernels
    (``ingest.arrow``), writes its events with pyarrow and hands back only its count of
    events and, folded per hash bucket, the lines that are not events. The JVM
    parses nothing: Spark SQL's parse cost more per line than Python's (BENCHMARKS.md,
    "Pipeline"). ``parse_line`` is the reference the tests hold the vectorized parse to,
    and parses the lines that are not a broker's exact shape."""
    from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415

    from quotagate.pipeline.ingest.read import deal_pieces  # noqa: PLC0415
    from quotagate.pipeline.ingest.task import TASK_SCHEMA, IngestJob, run_task  # noqa: PLC0415

    files = _input_files(Path(logs))
    tasks = spark.sparkContext.defaultParallelism
    # Absolute: an executor's working directory is not the driver's.
    job = IngestJob(deal_pieces(files, tasks), str(Path(out).resolve()), tz)
    shutil.rmtree(out, ignore_errors=True)
    Path(out).mkdir(parents=True)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                yield from run_task(job, int(task))

    parsed = spark.range(0, tasks, numPartitions=tasks).mapInArrow(
        run, from_arrow_schema(TASK_SCHEMA)
    )
    return _report(_bucket_samples(parsed), out, logs, len(files))


def write_parsed(
    parsed: DataFrame, out: str | Path, logs: str | Path, files: int
) -> dict[str, Any]:
    """Write the events among ``parsed`` (usage columns plus ``status``, ``reason`` and
    ``line`` per line, as ``parse_line`` returns them) with Spark, and the report of all
    lines: the write of the ingest that parsed every line with ``parse_line`` in a Python
    worker, which ``benchmarks/pipeline.py`` runs as its baseline.

    One pass over the lines: the write of the events also counts every bucket and keeps
    samples of the lines that are not events (no cache, no second parse)."""
    from pyspark.sql import Observation  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    seen = Observation("ingest")
    observed = parsed.observe(seen, *_bucket_metrics())
    ok = F.col("status") == "ok"
    write_usage(observed.where(ok).drop("status", "reason", "line"), out, shuffle=False)
    return _report(seen.get, out, logs, files)


def _report(
    metrics: dict[str, Any], out: str | Path, logs: str | Path, files: int
) -> dict[str, Any]:
    counts = {status: int(metrics[status] or 0) for status in _STATUSES}
    if counts["ok"] == 0:
        shutil.rmtree(out, ignore_errors=True)
        raise PipelineError(
            f"no request-log line under {logs} parsed "
            f"({counts['error']} failed, {counts['other']} other lines); "
            "is kafka.request.logger at DEBUG?"
        )
    report = {
        "files": files,
        "lines": sum(counts.values()),
        "events": counts["ok"],
        "failed": counts["error"],
        "other": counts["other"],
        "failed_samples": _samples(metrics, "error"),
        "other_samples": _samples(metrics, "other"),
    }
    write_json(Path(out) / REPORT_NAME, report)
    return report


def _bucket_samples(tasks: DataFrame) -> dict[str, Any]:
    """What ``_bucket_metrics`` finds, from the tasks' rows (``status``, ``reason``,
    ``line``, the ``lines`` each stands for and their ``bucket``), folded once more per
    status and bucket: a small plan, where the 83 aggregates of one row cost a second of
    planning and code generation per ingest (BENCHMARKS.md, "Pipeline")."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    least = F.min(F.when(F.col("status") != "ok", F.struct("line", "reason")))
    grouped = tasks.groupBy("status", "bucket").agg(
        F.sum("lines").alias("lines"), F.to_json(least).alias("sample")
    )
    metrics: dict[str, Any] = dict.fromkeys(_STATUSES, 0)
    for row in grouped.collect():
        metrics[row["status"]] += row["lines"]
        metrics[f"{row['status']}_{row['bucket']}"] = row["sample"]
    return metrics


def _bucket_metrics() -> list[Any]:
    """Aggregates over every parsed line: a count per status, and for the two statuses of
    lines that are not events, the least line of each hash bucket (``ingest.samples``)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    status = F.col("status")
    metrics = [F.count(F.when(status == name, 1)).alias(name) for name in _STATUSES]
    spread = spark_bucket(F.col("line"))
    for name in ("error", "other"):
        for bucket in range(SAMPLE_BUCKETS):
            # As JSON text: an observed metric cannot be a struct.
            least = F.min(F.when((status == name) & (spread == bucket), F.struct("line", "reason")))
            metrics.append(F.to_json(least).alias(f"{name}_{bucket}"))
    return metrics


def _samples(metrics: Any, status: str) -> list[dict[str, str]]:
    found = (metrics.get(f"{status}_{bucket}") for bucket in range(SAMPLE_BUCKETS))
    samples = [json.loads(text) for text in found if text is not None][:SAMPLES]
    return [{"reason": sample.get("reason"), "line": sample["line"]} for sample in samples]


def _input_files(logs: Path) -> list[Path]:
    if not logs.exists():
        raise PipelineError(f"{logs} does not exist")
    if logs.is_file():
        return [logs]
    files = sorted(p for p in logs.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        raise PipelineError(f"{logs} holds no log files (empty directory?)")
    return files
