"""Hypothesis strategies for kio entities, built from the dataclass fields' own metadata.

``hypothesis.strategies.from_type`` can build kio entities too, but at about 0.1 s an
example it would spend the whole test budget on a few dozen bodies; reading each field's
``kafka_type``, tag and ``tuple``/``Optional`` shape once per schema and composing plain
strategies is two orders of magnitude faster. Values stay small (short strings, at most a
few array entries) because the lies, not the sizes, are what the fuzz suite is after.
"""

from __future__ import annotations

import datetime
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any, Final

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.static.primitive import Records, TZAware
from kio.static.protocol import Entity

from fuzz.shapes import field_shape
from quotagate.protocol import api_table

MAX_ITEMS: Final = 3
MAX_TEXT: Final = 12

# kio's native reader turns milliseconds into i64 microseconds: longer durations, which its
# writer accepts, are refused on the way back (a CodecError, fine for hostile input, but
# valid bodies must round-trip).
_NATIVE_I64_DELTA_MS: Final = (1 << 63) // 1000 - 1
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# TZAware holds whole seconds only; stay inside what datetime can represent in UTC.
_MAX_EPOCH_S: Final = int(
    (datetime.datetime(9999, 1, 1, tzinfo=datetime.UTC) - _EPOCH).total_seconds()
)


def _ints(bits: int, *, signed: bool = True) -> st.SearchStrategy[int]:
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    # Boundary values are where length and sign bugs live; hypothesis finds them, but
    # asking for them directly makes small budgets hit them too.
    edges = st.sampled_from(sorted({low, high, -1 if signed else 0, 0, 1}))
    return st.one_of(edges, st.integers(low, high))


def _timedelta_ms(low_ms: int, high_ms: int) -> st.SearchStrategy[datetime.timedelta]:
    return st.integers(low_ms, high_ms).map(lambda ms: datetime.timedelta(milliseconds=ms))


def _datetimes() -> st.SearchStrategy[datetime.datetime]:
    return st.integers(0, _MAX_EPOCH_S).map(
        lambda s: TZAware.parse(_EPOCH + datetime.timedelta(seconds=s))
    )


_PRIMITIVES: Final[dict[str, st.SearchStrategy[Any]]] = {
    "bool": st.booleans(),
    "int8": _ints(8),
    "int16": _ints(16),
    "int32": _ints(32),
    "int64": _ints(64),
    "uint8": _ints(8, signed=False),
    "uint16": _ints(16, signed=False),
    "uint32": _ints(32, signed=False),
    "uint64": _ints(64, signed=False),
    "float64": st.floats(allow_nan=False, allow_infinity=False),
    "error_code": st.sampled_from(list(ErrorCode)),
    "timedelta_i32": _timedelta_ms(-(1 << 31), (1 << 31) - 1),
    "timedelta_i64": _timedelta_ms(-_NATIVE_I64_DELTA_MS, _NATIVE_I64_DELTA_MS),
    "datetime_i64": _datetimes(),
    # The zero UUID is kio's null: a generated one would not survive a round trip.
    "uuid": st.uuids().filter(lambda u: u.int != 0),
    "string": st.text(max_size=MAX_TEXT),
    "bytes": st.binary(max_size=MAX_TEXT),
    "records": st.binary(max_size=MAX_TEXT).map(Records),
}


def entities(schema: type[Entity]) -> st.SearchStrategy[Any]:
    """Instances of ``schema`` (any kio entity: request, response or nested)."""
    return _entity_strategy(schema)


def body_schemas() -> list[tuple[str, int, int, type[Entity]]]:
    """(``"request"``/``"response"``, api key, version, schema) for every modelled version.

    Every version kio models is one the gateway may decode or forward (the advertised
    ranges are these, minus caps for address-bearing versions), so all of them are fuzzed.
    """
    result: list[tuple[str, int, int, type[Entity]]] = []
    for api_key in sorted(api_key_map):
        versions = api_table.modelled_versions(api_key)
        for version in versions or ():
            result.append(("request", api_key, version, api_table.request_schema(api_key, version)))
            result.append(
                ("response", api_key, version, api_table.response_schema(api_key, version))
            )
    return result


@cache
def _entity_strategy(schema: type[Entity]) -> st.SearchStrategy[Any]:
    kwargs = {field.name: _field_strategy(field) for field in fields(schema)}
    return st.builds(schema, **kwargs)


def _field_strategy(field: Field[Any]) -> st.SearchStrategy[Any]:
    inner, is_array, optional = field_shape(field.type)
    if is_dataclass(inner):
        element: st.SearchStrategy[Any] = st.deferred(lambda: _entity_strategy(inner))
    else:
        element = _PRIMITIVES[field.metadata["kafka_type"]]
    value = st.lists(element, max_size=MAX_ITEMS).map(tuple) if is_array else element
    is_tag = "tag" in field.metadata
    if optional:
        value = st.one_of(st.none(), value)
    if is_tag and field.default is not MISSING:
        # A tagged field equal to its default is not written at all: cover both.
        value = st.one_of(st.just(field.default), value)
    return value
