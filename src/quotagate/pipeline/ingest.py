"""``ingest``: Kafka broker request logs (text or KIP-673 JSON) to usage events.

Every input line ends in exactly one bucket: ``ok`` (became an event), ``error`` (a
request-log line that did not parse) or ``other`` (not a request-log line: other loggers,
stack-trace continuations). Counts and samples of the last two go into the stage report;
nothing is dropped silently.

Mapping to the usage schema: the event time is the log time minus ``totalTime`` (usage
events stamp when a request was read); ``gateway_time_us`` is ``localTime``, the I/O-thread
time KIP-124 charges (the log does not split out network-thread time); remote time is
purgatory time and never charged, so ``upstream_time_us`` is 0. Request logs carry no frame
sizes: produce bytes are the record bytes, fetch bytes the records returned.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, timezone
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.events import write_usage
from quotagate.pipeline.ingest_json import parse_json_request
from quotagate.pipeline.ingest_text import parse_text_request
from quotagate.pipeline.logline import (
    LineError,
    ParsedRequest,
    client_host,
    request_start_ms,
    split_line,
)
from quotagate.pipeline.tables import write_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPORT_NAME: Final = "_ingest_report.json"
SAMPLES: Final = 20
_SAMPLE_BUCKETS: Final = 2 * SAMPLES
_STATUSES: Final = ("ok", "error", "other")


def parse_line(line: str, gateway_id: str, tz: timezone = UTC) -> dict[str, Any]:
    """One input line as a usage row plus ``status``/``reason``."""
    try:
        split = split_line(line, tz)
        if split is None:
            return _status("other", "not a 'Completed request' line", line)
        logged_ms, body = split
        parsed = parse_json_request(body) if body.startswith("{") else parse_text_request(body)
    except LineError as exc:
        return _status("error", str(exc), line)
    return _row(parsed, logged_ms, gateway_id)


def ingest(
    spark: SparkSession, logs: str | Path, out: str | Path, *, tz: timezone = UTC
) -> dict[str, Any]:
    """Parse every line under ``logs`` and write events under ``out`` (+ the report).

    The lines are parsed by Spark SQL in the JVM (``ingest_sql``); ``parse_line`` is the
    same parsing in Python, kept as the reference the tests hold the JVM's to."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    from quotagate.pipeline.ingest_sql import parse_lines  # noqa: PLC0415

    files = _input_files(Path(logs))
    lines = spark.read.text([str(f) for f in files]).withColumn("file", F.input_file_name())
    return write_parsed(parse_lines(lines, tz), out, logs, len(files))


def write_parsed(
    parsed: DataFrame, out: str | Path, logs: str | Path, files: int
) -> dict[str, Any]:
    """Write the events among ``parsed`` (usage columns plus ``status``, ``reason`` and
    ``line``, as ``ingest_sql.parse_lines`` returns them) and the report of all lines.

    One pass over the lines: the write of the events also counts every bucket and keeps
    samples of the lines that are not events (no cache, no second parse)."""
    from pyspark.sql import Observation  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    seen = Observation("ingest")
    observed = parsed.observe(seen, *_bucket_metrics())
    ok = F.col("status") == "ok"
    write_usage(observed.where(ok).drop("status", "reason", "line"), out, shuffle=False)
    metrics = seen.get
    counts = {status: int(metrics[status]) for status in _STATUSES}
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


def _row(parsed: ParsedRequest, logged_ms: int, gateway_id: str) -> dict[str, Any]:
    return {
        "ts_ms": request_start_ms(logged_ms, parsed.total_time_ms),
        "gateway_id": gateway_id,
        "listener": parsed.listener,
        "principal": parsed.principal,
        "client_id": parsed.client_id,
        "client_host": client_host(parsed.connection),
        "api_key": parsed.api_key,
        "api_version": parsed.api_version,
        "request_bytes": parsed.request_bytes,
        "response_bytes": parsed.response_bytes,
        "topics": [{"topic": t, "bytes": b} for t, b in parsed.topics],
        "partition_mutations": parsed.partition_mutations,
        "acks": parsed.acks,
        "follower": parsed.follower,
        "validate_only": parsed.validate_only,
        "gateway_time_us": round(parsed.local_time_ms * 1000),
        "upstream_time_us": 0,
        "throttle_ms": parsed.throttle_time_ms,
        "throttle_cause": "",
        "error_code": 0,
        "tenant": "",  # a broker's log names no tenant
        "shadow_throttle_ms": None,
        "status": "ok",
        "reason": None,
        "line": None,
    }


def _status(status: str, reason: str, line: str) -> dict[str, Any]:
    return {"status": status, "reason": reason, "line": line[:2000]}


def _bucket_metrics() -> list[Any]:
    """Aggregates over every parsed line: a count per bucket, and for the two buckets of
    lines that are not events, one sample per hash bucket of the line (bounded memory
    whatever the number of such lines; lines that share a hash bucket give one sample)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    status = F.col("status")
    metrics = [F.count(F.when(status == name, 1)).alias(name) for name in _STATUSES]
    spread = F.pmod(F.xxhash64("line"), F.lit(_SAMPLE_BUCKETS))
    for name in ("error", "other"):
        for bucket in range(_SAMPLE_BUCKETS):
            # As JSON text: an observed metric cannot be a struct.
            sample = F.when(
                (status == name) & (spread == bucket), F.to_json(F.struct("line", "reason"))
            )
            # The least line of the bucket: the same samples however the lines are split.
            metrics.append(F.min(sample).alias(f"{name}_{bucket}"))
    return metrics


def _samples(metrics: Any, status: str) -> list[dict[str, str]]:
    found = (metrics[f"{status}_{bucket}"] for bucket in range(_SAMPLE_BUCKETS))
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


def gateway_of(file_uri: str) -> str:
    """Broker logs carry no broker id; the file name stands in for it (e.g. broker-1.log)."""
    name = PurePosixPath(file_uri).name
    for suffix in (".gz", ".log"):
        name = name.removesuffix(suffix)
    return name or "broker"
