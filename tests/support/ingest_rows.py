"""Parsed request-log rows in a form two parses can be compared in: the reference parser's
(``parse_line``) and the vectorized one's, order aside."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timezone
from typing import Any

from quotagate.pipeline.ingest.job import parse_line
from quotagate.usage.schema import USAGE_SCHEMA

Row = tuple[tuple[str, Any], ...]


def canonical(row: dict[str, Any]) -> Row:
    topics = row.get("topics")
    if topics is not None:
        row = {**row, "topics": tuple((t["topic"], t["bytes"]) for t in topics)}
    return tuple(sorted(row.items()))


def ordered(rows: Iterable[dict[str, Any]]) -> list[Row]:
    """``rows`` canonical, in one order whatever order they came in."""
    return sorted(map(canonical, rows), key=repr)


def reference(lines: list[str], gateway_id: str, tz: timezone) -> tuple[list[Row], list[Row]]:
    """(events, other lines) as the reference parser makes them."""
    rows = [parse_line(line, gateway_id, tz) for line in lines]
    events = [{k: r[k] for k in USAGE_SCHEMA.names} for r in rows if r["status"] == "ok"]
    rest = [{k: r[k] for k in ("status", "reason", "line")} for r in rows if r["status"] != "ok"]
    return ordered(events), ordered(rest)
