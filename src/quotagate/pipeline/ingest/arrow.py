"""A block of request-log lines to usage events with whole-array kernels (pyarrow compute,
numpy): no Python per line for the lines a broker writes.

Each line is sorted the way ``ingest.parse_line`` (the reference) sorts it. A line without
the marker is ``other``. A line that has the broker's exact shape (ASCII, the log4j prefix
with single blanks, one marker, the message right after it and ending in
`` (kafka.request.logger)``, a real time) is parsed here, its body by ``arrow_json``
or ``arrow_text``. Every other line, and every body those hand back, goes through
the reference itself: that is where lines fail, so every ``error`` line and its reason are
the reference's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta, timezone
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from quotagate.pipeline.ingest.arrays import (
    BoolArray,
    IntArray,
    as_bool,
    find,
    offsets_of,
)
from quotagate.pipeline.ingest.arrow_json import Parsed, parse_json_bodies
from quotagate.pipeline.ingest.arrow_text import parse_text_bodies
from quotagate.pipeline.ingest.log4j import MARKER
from quotagate.pipeline.ingest.reference import SAMPLE_CHARS, integer_range, parse_line
from quotagate.usage.schema import TOPIC_BYTES_TYPE, USAGE_SCHEMA

OTHER_REASON: Final = "not a 'Completed request' line"
# What the task hands back for lines that are not events (with a count for ``ok``).
REST_SCHEMA: Final = pa.schema(
    [("status", pa.string()), ("reason", pa.string()), ("line", pa.string())]
)
_SUFFIX: Final = " (kafka.request.logger)"
_PREFIX: Final = (
    r"^\[(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})(?:[,.](?P<ms>\d{1,3}))?\]"
    r" +[A-Z]+ +"
)
# Blanks as Python's str.strip and re's \s know them in ASCII text.
_BLANKS: Final = list(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")


@dataclass(slots=True)
class Block:
    """The events of a block of lines, and its lines that are not events."""

    events: pa.Table
    rest: pa.Table


def parse_block(lines: pa.Array, gateway_id: str, tz: timezone) -> Block:
    """``lines`` (strings) as usage events (``USAGE_SCHEMA``) and the ``error`` / ``other``
    lines with their reasons (``REST_SCHEMA``)."""
    binary = lines.view(pa.large_binary() if pa.types.is_large_string(lines.type) else pa.binary())
    marker = find(binary, MARKER)
    other = marker < 0
    shaped, logged_ms = _broker_shaped(binary, marker)
    offsets, data = offsets_of(binary)
    start, stop = marker + len(MARKER), np.diff(offsets) - len(_SUFFIX)
    first = _byte_at(offsets, data, start, shaped)
    last = _byte_at(offsets, data, stop - 1, shaped)
    is_json = shaped & (first == ord("{")) & (last == ord("}"))
    tables: list[pa.Table] = []
    handed_back = ~other & ~shaped
    for chosen, parse in ((is_json, parse_json_bodies), (shaped & ~is_json, parse_text_bodies)):
        rows = np.flatnonzero(chosen)
        if not len(rows):
            continue
        parsed = parse(binary, rows, start[rows], stop[rows])
        handed_back[rows[~parsed.ok]] = True
        read = rows[parsed.ok]
        events, fits = _events(parsed, utc_ms(logged_ms[read], tz), gateway_id)
        handed_back[read[~fits]] = True
        tables.append(events)
    rest = [_other_lines(lines, other)]
    if handed_back.any():
        texts = lines.take(pa.array(np.flatnonzero(handed_back))).to_pylist()
        events, failed = _by_reference(texts, gateway_id, tz)
        tables.append(events)
        rest.append(failed)
    events = pa.concat_tables(tables) if tables else USAGE_SCHEMA.empty_table()
    return Block(events, pa.concat_tables(rest))


def _by_reference(texts: list[str], gateway_id: str, tz: timezone) -> tuple[pa.Table, pa.Table]:
    """The events and the failed lines among ``texts``, as ``parse_line`` parses them."""
    parsed = [parse_line(text, gateway_id, tz) for text in texts]
    events = [
        {name: row[name] for name in USAGE_SCHEMA.names} for row in parsed if row["status"] == "ok"
    ]
    failed = [row for row in parsed if row["status"] != "ok"]
    return (
        pa.Table.from_pylist(events, schema=USAGE_SCHEMA),
        pa.Table.from_pylist(failed, schema=REST_SCHEMA),
    )


def _broker_shaped(binary: pa.Array, marker: IntArray) -> tuple[BoolArray, IntArray]:
    """Which lines have a broker's exact shape, and their log time as written (epoch ms
    of the wall-clock time; 0 for other lines)."""
    offsets, data = offsets_of(binary)
    size = np.diff(offsets)
    start, stop = marker + len(MARKER), size - len(_SUFFIX)
    shaped = (marker >= 0) & (start < stop)
    shaped &= as_bool(pc.ends_with(binary, _SUFFIX))
    shaped &= ~np.isin(_byte_at(offsets, data, start, shaped), _BLANKS)
    shaped &= ~np.isin(_byte_at(offsets, data, stop - 1, shaped), _BLANKS)
    # Whole blocks first: a broker's lines are ASCII without control characters.
    if len(data) and (data.max() >= 0x80 or data.min() < 0x20):
        shaped &= as_bool(pc.match_substring_regex(binary, "^[\\x20-\\x7e\\t]*$"))
    shaped &= as_bool(pc.match_substring_regex(binary, _PREFIX))
    logged_ms = np.zeros(len(binary), np.int64)
    rows = np.flatnonzero(shaped)
    if not len(rows):
        return shaped, logged_ms
    # The prefix matched: the stamp's digits are at fixed places.
    first = offsets[:-1][rows]

    def number(at: int, width: int) -> IntArray:
        value = np.zeros(len(rows), np.int64)
        for place in range(at, at + width):
            value = value * 10 + data[first + place] - ord("0")
        return value

    year, month, day = number(1, 4), number(6, 2), number(9, 2)
    hour, minute, second = number(12, 2), number(15, 2), number(18, 2)
    digits = [data[first + place] for place in (21, 22, 23)]
    count = np.where(data[first + 20] == ord("]"), 0, 1)
    count += (count == 1) & (digits[1] != ord("]"))
    count += (count == 2) & (digits[2] != ord("]"))
    millis = np.zeros(len(rows), np.int64)
    for place, digit in enumerate(digits):
        millis += np.where(
            count > place, (digit.astype(np.int64) - ord("0")) * 10 ** (2 - place), 0
        )
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[
        np.clip(month, 0, 12)
    ]
    month_days = month_days + (leap & (month == 2))
    # What datetime refuses is the reference's to refuse (a bad timestamp).
    real = (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days)
    real &= (hour < 24) & (minute < 60) & (second < 60)
    days = _days_from_civil(year, month, day)
    logged_ms[rows] = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    shaped[rows[~real]] = False
    return shaped, logged_ms


def _days_from_civil(year: IntArray, month: IntArray, day: IntArray) -> IntArray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm)."""
    year = year - (month <= 2)
    era = np.floor_divide(year, 400)
    year_of_era = year - era * 400
    day_of_year = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return np.asarray(era * 146097 + day_of_era - 719468, np.int64)


def utc_ms(logged_ms: IntArray, tz: timezone) -> IntArray:
    """Log times read in ``tz``, as UTC epoch ms (floored, as ``parse_log4j_time``)."""
    offset_us = (tz.utcoffset(None) or timedelta(0)) // timedelta(microseconds=1)
    return np.floor_divide(logged_ms * 1000 - offset_us, 1000)


def _byte_at(offsets: IntArray, data: np.ndarray, at: IntArray, rows: BoolArray) -> IntArray:
    """The byte at ``at`` of every row ``rows`` marks (-1 elsewhere)."""
    inside = rows & (at >= 0) & (at < np.diff(offsets))
    found = np.full(len(at), -1, np.int64)
    found[inside] = data[offsets[:-1][inside] + at[inside]]
    return found


def _other_lines(lines: pa.Array, other: BoolArray) -> pa.Table:
    chosen = lines.filter(pa.array(other))
    return pa.table(
        {
            "status": pa.repeat(pa.scalar("other"), len(chosen)),
            "reason": pa.repeat(pa.scalar(OTHER_REASON), len(chosen)),
            "line": pc.cast(pc.utf8_slice_codeunits(chosen, 0, SAMPLE_CHARS), pa.string()),
        },
        schema=REST_SCHEMA,
    )


FloatArray = np.ndarray[Any, np.dtype[np.float64]]
# Columns computed from floats, checked before they are made integers.
_DERIVED: Final = frozenset({"ts_ms", "gateway_time_us", "throttle_ms"})


def _events(parsed: Parsed, logged_ms: IntArray, gateway_id: str) -> tuple[pa.Table, BoolArray]:
    """The events of the rows whose numbers fit their columns, and which rows those are
    (the others are the reference's to refuse, as it refuses them: out of range)."""
    rows = len(logged_ms)
    start_ms = logged_ms - np.rint(parsed.total_ms)
    local_us = np.rint(parsed.local_ms * 1000)
    fits = _within(start_ms, pa.int64()) & _within(local_us, pa.int64())
    fits &= _within(parsed.throttle_ms, pa.int32())
    host = pc.struct_field(pc.extract_regex(parsed.connection, r"^[^-]*-(?P<peer>[^-]*)-"), "peer")
    columns: dict[str, Any] = {
        "ts_ms": np.where(fits, start_ms, 0).astype(np.int64),
        "gateway_id": pa.repeat(pa.scalar(gateway_id), rows),
        "listener": parsed.listener,
        "principal": parsed.principal,
        "client_id": parsed.client_id,
        "client_host": pc.coalesce(host, parsed.connection),
        "api_key": parsed.api_key,
        "api_version": parsed.api_version,
        "request_bytes": parsed.request_bytes,
        "response_bytes": parsed.response_bytes,
        "topics": parsed.topics,
        "partition_mutations": parsed.partition_mutations,
        "acks": parsed.acks,
        "follower": parsed.follower,
        "validate_only": parsed.validate_only,
        "gateway_time_us": np.where(fits, local_us, 0).astype(np.int64),
        "upstream_time_us": np.zeros(rows, np.int64),
        "throttle_ms": np.where(fits, parsed.throttle_ms, 0).astype(np.int32),
        "throttle_cause": pa.repeat(pa.scalar(""), rows),
        "error_code": np.zeros(rows, np.int16),
        "tenant": pa.repeat(pa.scalar(""), rows),
        "shadow_throttle_ms": pa.nulls(rows, pa.int32()),
    }
    for field in USAGE_SCHEMA:
        if field.name in _DERIVED or not pa.types.is_signed_integer(field.type):
            continue
        values = _array(columns[field.name])
        if pa.types.is_integer(values.type) and values.type.bit_width > field.type.bit_width:
            numbers = pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
            fits &= _within(np.asarray(numbers, np.float64), field.type)
    fits &= _topic_bytes_fit(_array(columns["topics"]))
    if not fits.all():
        keep = pa.array(fits)
        columns = {name: _array(values).filter(keep) for name, values in columns.items()}
    arrays = [_array(columns[f.name]).cast(f.type) for f in USAGE_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=USAGE_SCHEMA), fits


def _topic_bytes_fit(topics: pa.Array) -> BoolArray:
    """Per row, whether every topic's bytes fit the usage column's type."""
    fits = np.ones(len(topics), np.bool_)
    flat = pc.list_flatten(topics)
    if not len(flat):
        return fits
    numbers = pc.fill_null(pc.struct_field(flat, "bytes"), 0).to_numpy(zero_copy_only=False)
    outside = ~_within(np.asarray(numbers, np.float64), TOPIC_BYTES_TYPE.field("bytes").type)
    fits[np.asarray(pc.list_parent_indices(topics).to_numpy(), np.int64)[outside]] = False
    return fits


def _within(values: FloatArray, kind: pa.DataType) -> BoolArray:
    """Which values lie in the range of the integer type ``kind``, as the reference checks
    it (NaN and infinities do not)."""
    low, high = integer_range(kind)
    # high + 1 is a power of two, exact as a float where high itself may not be.
    return np.asarray((values >= float(low)) & (values < float(high + 1)), np.bool_)


def _array(values: Any) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values)
