"""One request-log line parsed in Python: the reference parse.

``ingest_arrow`` parses a broker's lines with whole-array kernels and hands every other
line to ``parse_line``; the tests hold the vectorized parse to this one, line by line.
"""

from __future__ import annotations

from datetime import UTC, timezone
from pathlib import PurePosixPath
from typing import Any

from quotagate.pipeline.ingest_json import parse_json_request
from quotagate.pipeline.ingest_text import parse_text_request
from quotagate.pipeline.logline import (
    LineError,
    ParsedRequest,
    client_host,
    request_start_ms,
    split_line,
)

SAMPLE_CHARS = 2000


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
    return {"status": status, "reason": reason, "line": line[:SAMPLE_CHARS]}


def gateway_of(file_uri: str) -> str:
    """Broker logs carry no broker id; the file name stands in for it (e.g. broker-1.log)."""
    name = PurePosixPath(file_uri).name
    for suffix in (".gz", ".log"):
        name = name.removesuffix(suffix)
    return name or "broker"
