"""Request-log lines to usage rows in Spark SQL: the parsing runs in the JVM, no Python
worker touches a line.

Every step mirrors the Python parser (``ingest.parse_line`` with ``logline``,
``ingest_text`` and ``ingest_json``), which stays as the reference the tests compare this
with, line by line, on the fixtures and on generated logs: the same ``ok`` / ``error`` /
``other`` bucket, the same reason (Python's JSON decoder adds its own message after
"invalid JSON"; this says only that), the same event. Where the two can differ is on
lines no broker writes (a JSON document with trailing text, a number spelt as a string).
"""

from __future__ import annotations

from datetime import timedelta, timezone
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_type

from quotagate.pipeline.ingest_sql_json import parse_json
from quotagate.pipeline.ingest_sql_text import parse_text
from quotagate.pipeline.logline import MARKER
from quotagate.usage.schema import USAGE_SCHEMA

_PREFIX: Final = (
    r"^\[((\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[,.](\d{1,3}))?)\]\s+([A-Z]+)\s+"
)
_SUFFIX: Final = r"\s*\((?:kafka\.request\.logger|[\w.$]+)\)\s*$"
_EDGES: Final = r"^\s+|\s+$"
_LOGGER_SUFFIX: Final = " (kafka.request.logger)"
# Neither a blank Java's \s knows nor one Python's str.strip knows.
_NOT_BLANK: Final = r"^[^\s\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$"
_SAMPLE_CHARS: Final = 2000
_NO_PREFIX: Final = "no log4j '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL' prefix before the message"


def parse_lines(lines: DataFrame, tz: timezone) -> DataFrame:
    """``lines`` (``value``: the line, ``file``: its file's URI) as usage columns plus
    ``status``, ``reason`` and ``line`` (the line, for lines that are not events)."""
    line = F.col("value")
    marker = F.instr(line, MARKER)
    staged = lines.select(
        line.alias("line"),
        _gateway_of(F.col("file")).alias("gateway_id"),
        marker.alias("marker"),
        # The prefix once, so that the time's parts are read from it and not from the line.
        F.regexp_extract(line, _PREFIX, 0).alias("prefix"),
    )
    prefix = F.col("prefix")
    staged = staged.withColumns({"prefixed": prefix != "", "logged_ms": _logged_ms(prefix, tz)})
    marker, logged_ms = F.col("marker"), F.col("logged_ms")
    staged = staged.withColumns(
        {
            "early": F.when(marker == 0, "other").when(
                ~F.col("prefixed") | logged_ms.isNull(), "error"
            ),
            "early_reason": F.when(marker == 0, F.lit("not a 'Completed request' line"))
            .when(~F.col("prefixed"), F.lit(_NO_PREFIX))
            .when(
                logged_ms.isNull(),
                F.format_string("bad timestamp '%s'", F.regexp_extract("prefix", _PREFIX, 1)),
            ),
            "body": F.when(marker > 0, _body(F.col("line"), marker)),
        }
    )
    body, early = F.col("body"), F.col("early")
    staged = staged.withColumns(
        {
            "json_body": F.when(early.isNull() & body.startswith("{"), body),
            "text_body": F.when(early.isNull() & ~body.startswith("{"), body),
        }
    )
    staged = parse_text(parse_json(staged, "json_body", "pj"), "text_body", "pt")
    staged = staged.withColumn("p", F.coalesce(F.col("pj"), F.col("pt")))
    return staged.select(*_usage_columns(), *_status_columns())


def _body(line: Column, marker: Column) -> Column:
    """The message after the marker, without the logger's suffix and surrounding blanks;
    for a KIP-673 line, text that begins with the message and that ``from_json`` reads as
    the message alone.

    A broker's JSON line ends in ``} (kafka.request.logger)``: its message is cut by
    bytes, and the suffix left on, as ``from_json`` stops at the end of the object
    (cutting it off by characters walked the line four times, a sixth of the parse;
    Spark's search from the right for the marker cost as much, BENCHMARKS.md). Other
    lines that end in the suffix after a non-blank and have no blank after the marker
    are one cut by characters, with no regular expression over the whole line; the rest
    take the two replacements."""
    # After the first marker, cut by bytes: the marker is ASCII, so its byte offset is
    # the byte length of what precedes it (a search from the left: the marker is early).
    first = F.octet_length(F.substring_index(line, MARKER, 1)) + len(MARKER) + 1
    after_first = line.cast("binary").substr(first, F.octet_length(line)).cast("string")
    kip673 = after_first.startswith("{") & after_first.endswith("}" + _LOGGER_SUFFIX)
    start = marker + len(MARKER)
    end = F.char_length(line) - len(_LOGGER_SUFFIX)
    plain = (
        line.endswith(_LOGGER_SUFFIX)
        & F.substring(line, start, 1).rlike(_NOT_BLANK)
        & F.substring(line, end, 1).rlike(_NOT_BLANK)
        & (end >= start)
    )
    after = line.substr(start, F.char_length(line) + 1)
    stripped = F.regexp_replace(F.regexp_replace(after, _SUFFIX, ""), _EDGES, "")
    cut = F.when(plain, line.substr(start, end - start + 1)).otherwise(stripped)
    return F.when(kip673, after_first).otherwise(cut)


def _logged_ms(prefix: Column, tz: timezone) -> Column:
    """Epoch ms of the log4j stamp in the line's ``prefix``, read in ``tz``: null if the
    stamp is no real time."""

    def part(group: int) -> Column:
        return F.regexp_extract(prefix, _PREFIX, group)

    stamp = F.concat_ws(" ", part(2), part(3))
    seconds = F.unix_timestamp(F.try_to_timestamp(stamp, F.lit("yyyy-MM-dd HH:mm:ss")))
    fraction = F.rpad(part(4), 3, "0")
    naive_us = (seconds * 1000 + F.coalesce(fraction.cast("long"), F.lit(0))) * 1000
    offset = tz.utcoffset(None) or timedelta(0)
    utc_us = naive_us - offset // timedelta(microseconds=1)
    # Floor division, as Python's timedelta // timedelta.
    return ((utc_us - F.pmod(utc_us, F.lit(1000))) / 1000).cast("long")


def _gateway_of(file_uri: Column) -> Column:
    """Broker logs carry no broker id; the file name stands in for it (``ingest.gateway_of``)."""
    name = F.substring_index(file_uri, "/", -1)
    name = F.regexp_replace(F.regexp_replace(name, r"\.gz$", ""), r"\.log$", "")
    return F.when(name == "", "broker").otherwise(name)


def _usage_columns() -> list[Column]:
    p = F.col("p")
    columns = {
        "ts_ms": F.col("logged_ms") - F.bround(p["total_ms"]).cast("long"),
        "gateway_id": F.col("gateway_id"),
        "listener": p["listener"],
        "principal": p["principal"],
        "client_id": p["client_id"],
        "client_host": _client_host(p["connection"]),
        "api_key": p["api_key"],
        "api_version": p["api_version"],
        "request_bytes": F.coalesce(p["request_bytes"], F.lit(0)),
        "response_bytes": F.coalesce(p["response_bytes"], F.lit(0)),
        "topics": F.coalesce(p["topics"], F.array()),
        "partition_mutations": F.coalesce(p["partition_mutations"], F.lit(0)),
        "acks": p["acks"],
        "follower": p["follower"],
        "validate_only": p["validate_only"],
        "gateway_time_us": F.bround(p["local_ms"] * 1000).cast("long"),
        "upstream_time_us": F.lit(0),
        "throttle_ms": p["throttle_ms"],
        "throttle_cause": F.lit(""),
        "error_code": F.lit(0),
        "tenant": F.lit(""),
        "shadow_throttle_ms": F.lit(None),
    }
    ok = F.col("early").isNull() & p["error"].isNull()
    typed = []
    for field in USAGE_SCHEMA:
        # A column the log has no source for (one a newer schema adds) is left null.
        column = columns.get(field.name, F.lit(None))
        if field.name == "topics":
            column = F.transform(
                column,
                lambda t: F.struct(
                    t["topic"].alias("topic"), t["bytes"].cast("int").alias("bytes")
                ),
            )
        else:
            column = column.cast(from_arrow_type(field.type))
        typed.append(F.when(ok, column).alias(field.name))
    return typed


def _status_columns() -> list[Column]:
    error = F.col("p")["error"]
    status = F.coalesce(F.col("early"), F.when(error.isNotNull(), "error"), F.lit("ok"))
    reason = F.coalesce(F.col("early_reason"), error)
    return [
        status.alias("status"),
        reason.alias("reason"),
        F.when(reason.isNotNull(), F.col("line").substr(1, _SAMPLE_CHARS)).alias("line"),
    ]


def _client_host(connection: Column) -> Column:
    """The peer of a connection id ``local:port-peer:port-index`` (``logline.client_host``)."""
    parts = F.split(connection, "-")
    return F.when(F.size(parts) >= 3, parts[1]).otherwise(connection)
