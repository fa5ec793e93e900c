"""What the two Spark SQL request-log parsers share: the parsed struct they both return and
small column helpers."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812

# The parsed struct's fields, in order; null where a request does not have the fact.
PARSED_FIELDS = (
    "api_key",
    "api_version",
    "client_id",
    "principal",
    "listener",
    "connection",
    "total_ms",
    "local_ms",
    "throttle_ms",
    "request_bytes",
    "response_bytes",
    "topics",
    "partition_mutations",
    "acks",
    "follower",
    "validate_only",
    "error",
)


def parsed_struct(**fields: Column) -> Column:
    """One line's facts (``PARSED_FIELDS``); ``error`` is the reason the line failed, or null."""
    assert tuple(fields) == PARSED_FIELDS, "fields out of order"
    return F.struct(*(column.alias(name) for name, column in fields.items()))


def first_error(*checks: tuple[Column, Column]) -> Column:
    """The reason of the first failing check (checks in the Python parser's order)."""
    reason = F.lit(None).cast("string")
    for failed, why in reversed(checks):
        reason = F.when(failed, why).otherwise(reason)
    return reason


def integers(texts: Column) -> Column:
    """An array of digit strings as longs (what Python's ``int()`` does to each)."""
    return F.transform(texts, lambda text: text.cast("long"))


def total(values: Column) -> Column:
    return F.aggregate(values, F.lit(0).cast("long"), lambda acc, value: acc + value)


def named_api_key(name: Column, names: Mapping[str, int]) -> Column:
    """The API key of an ApiKeys enum name as the text log prints it; null if unknown."""
    table = F.create_map(*chain.from_iterable((F.lit(k), F.lit(v)) for k, v in names.items()))
    return F.try_element_at(table, name)
