"""What every ``kafka.request.logger`` line shares, whichever Kafka version wrote it.

A line is log4j's default broker layout, ``[%d] %p %m (%c)%n``:
``[2021-03-04 10:15:32,123] DEBUG Completed request:... (kafka.request.logger)``. The
message body is the text format (Kafka < 2.8) or a JSON object (KIP-673, Kafka >= 2.8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

MARKER: Final = "Completed request:"
_PREFIX: Final = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,3})?)\]\s+(?P<level>[A-Z]+)\s+"
)
_SUFFIX: Final = re.compile(r"\s*\((?:kafka\.request\.logger|[\w.$]+)\)\s*$")


class LineError(ValueError):
    """A request-log line that could not be understood; the message says why."""


class ForwardedRequestError(Exception):
    """A request-log line of a request a broker forwarded to the controller (KIP-590's
    envelope, ``"isForwarded":true`` in KIP-673's JSON): the broker the client sent it to
    logged the client's own request, so this line is not one more request of the client."""


@dataclass(slots=True)
class ParsedRequest:
    """Fields of one completed request, before they become a usage event."""

    api_key: int
    api_version: int
    client_id: str
    principal: str
    listener: str
    connection: str
    total_time_ms: float
    local_time_ms: float
    throttle_time_ms: int
    request_bytes: int = 0
    response_bytes: int = 0
    topics: list[tuple[str, int]] = field(default_factory=list)
    partition_mutations: int = 0
    acks: int | None = None
    follower: bool = False
    validate_only: bool = False


def split_line(line: str, tz: timezone) -> tuple[int, str] | None:
    """(logged epoch ms, message after the marker), or None for lines of other loggers."""
    marker = line.find(MARKER)
    if marker < 0:
        return None
    prefix = _PREFIX.match(line)
    if prefix is None:
        raise LineError("no log4j '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL' prefix before the message")
    logged_ms = parse_log4j_time(prefix["ts"], tz)
    body = _SUFFIX.sub("", line[marker + len(MARKER) :])
    return logged_ms, body.strip()


def parse_log4j_time(text: str, tz: timezone) -> int:
    stamp = text.replace("T", " ").replace(",", ".")
    try:
        parsed = datetime.strptime(
            stamp, "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S"
        )
    except ValueError:
        raise LineError(f"bad timestamp {text!r}") from None
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return (parsed.replace(tzinfo=tz) - epoch) // timedelta(milliseconds=1)


def client_host(connection: str) -> str:
    """The peer of a connection id ``local:port-peer:port-index``."""
    parts = connection.split("-")
    return parts[1] if len(parts) >= 3 else connection


def request_start_ms(logged_ms: int, total_time_ms: float) -> int:
    """The request is logged when it completes; usage events stamp when it was read."""
    return logged_ms - round(total_time_ms)
