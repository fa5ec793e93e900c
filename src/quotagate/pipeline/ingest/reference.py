"""One request-log line parsed in Python: the reference parse.

``ingest.arrow`` parses a broker's lines with whole-array kernels and hands every other
line to ``parse_line``; the tests hold the vectorized parse to this one, line by line.
"""

from __future__ import annotations

from datetime import UTC, timezone
from pathlib import PurePosixPath
from typing import Any, Final

import pyarrow as pa

from quotagate.pipeline.ingest.json_body import parse_json_request
from quotagate.pipeline.ingest.log4j import (
    ForwardedRequestError,
    LineError,
    ParsedRequest,
    client_host,
    request_start_ms,
    split_line,
)
from quotagate.pipeline.ingest.text import parse_text_request
from quotagate.usage.schema import TOPIC_BYTES_TYPE, USAGE_SCHEMA

SAMPLE_CHARS = 2000
FORWARDED: Final = "a request a broker forwarded to the controller (the broker logged it)"


def integer_range(kind: pa.DataType) -> tuple[int, int]:
    """The lowest and highest value of a signed integer type."""
    return -(2 ** (kind.bit_width - 1)), 2 ** (kind.bit_width - 1) - 1


INTEGER_RANGES: Final = tuple(
    (field.name, *integer_range(field.type))
    for field in USAGE_SCHEMA
    if pa.types.is_signed_integer(field.type)
)
"""(column, lowest, highest) of the usage columns that hold integers."""
_TOPIC_BYTES: Final = integer_range(TOPIC_BYTES_TYPE.field("bytes").type)


def parse_line(line: str, gateway_id: str, tz: timezone = UTC) -> dict[str, Any]:
    """One input line as a usage row plus ``status``/``reason``."""
    try:
        split = split_line(line, tz)
        if split is None:
            return _status("other", "not a 'Completed request' line", line)
        logged_ms, body = split
        parsed = parse_json_request(body) if body.startswith("{") else parse_text_request(body)
        row = _row(parsed, logged_ms, gateway_id)
        _check_ranges(row)
    except ForwardedRequestError:
        return _status("other", FORWARDED, line)
    except LineError as exc:
        return _status("error", str(exc), line)
    except (TypeError, ValueError, OverflowError, AttributeError) as exc:
        # A value of a kind no broker writes (a list for a name, NaN for a time): the line
        # is damaged; one such line must not fail the ingest of all the others.
        return _status("error", f"unreadable request ({type(exc).__name__})", line)
    return row


def _check_ranges(row: dict[str, Any]) -> None:
    """Every number must fit its usage column, as the vectorized parse requires too."""
    for name, low, high in INTEGER_RANGES:
        value = row[name]
        if isinstance(value, int) and not low <= value <= high:
            raise LineError(f"{name} out of range")
    for topic in row["topics"]:
        if not _TOPIC_BYTES[0] <= topic["bytes"] <= _TOPIC_BYTES[1]:
            raise LineError("topic bytes out of range")


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
