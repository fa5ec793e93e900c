"""A bounds walk over a body before kio decodes it: no declared length may outrun the frame.

kio's native reader sizes a container from its declared count before reading a single element,
and a Rust allocation failure aborts the process: no ``except`` can catch it. One 23-byte
CreateTopics frame claiming 2^34 topics was enough to take the whole gateway down. Kafka's
generated readers refuse such a count up front ("Tried to allocate a collection of size N, but
there are only M bytes remaining"); this module applies the same rule to every array, string,
bytes field, nullable struct and tagged field that kio's schema metadata describes, for every
API and version, without building anything.

The walk is compiled once per schema into nested closures, mirroring how kio builds its
readers, so a check costs a handful of slice-free integer reads per field. A body that passes
is one kio can decode with allocations bounded by the bytes received; a body that fails raises
:class:`LengthError` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, fields, is_dataclass
from functools import cache
from struct import Struct
from types import NoneType, UnionType
from typing import Any, Final, TypeAlias, Union, get_args, get_origin

from kio.static.protocol import Entity

from quotagate.protocol.errors import ProtocolError

# (frame, offset, end) -> offset after the value; ``end`` bounds a tagged field's window.
Walk: TypeAlias = Callable[[bytes, int, int], int]

_INT8 = Struct(">b")
_INT16 = Struct(">h")
_INT32 = Struct(">i")
_MAX_VARINT_BYTES: Final = 5

_FIXED_SIZES: Final[dict[str, int]] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_SIZED: Final = frozenset({"string", "bytes", "records"})


class LengthError(ProtocolError):
    """A declared length or count that the rest of the frame cannot hold, or that the schema
    does not allow (a negative length other than null, null in a non-nullable array)."""


def check_body(schema: type[Entity], frame: bytes, offset: int) -> int:
    """Walk the body of ``schema`` at ``offset``; returns where it ends.

    Raises :class:`LengthError` on any length the frame cannot back, or on a truncated body.
    """
    return _entity_walk(schema)(frame, offset, len(frame))


# -- primitives -------------------------------------------------------------------------------


def _need(offset: int, size: int, end: int, what: str) -> int:
    if size > end - offset:
        raise LengthError(f"{what} needs {size} bytes, {max(end - offset, 0)} left")
    return offset + size


def _uvarint(frame: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
    value = 0
    for i in range(_MAX_VARINT_BYTES):
        if offset >= end:
            raise LengthError(f"{what}: varint runs past the end")
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, offset
    raise LengthError(f"{what}: varint longer than {_MAX_VARINT_BYTES} bytes")


def _legacy_length(
    frame: bytes, offset: int, end: int, unpack: Struct, what: str
) -> tuple[int, int]:
    start = offset
    offset = _need(offset, unpack.size, end, what)
    (length,) = unpack.unpack_from(frame, start)
    if length < -1:
        raise LengthError(f"{what}: invalid length {length}")
    return length, offset


def _length_reader(
    flexible: bool, legacy: Struct
) -> Callable[[bytes, int, int, str], tuple[int, int]]:
    """Reads a length that is -1 for null: compact (N + 1 as uvarint) or legacy (signed int)."""
    if flexible:

        def compact(frame: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
            value, offset = _uvarint(frame, offset, end, what)
            return value - 1, offset

        return compact

    def legacy_length(frame: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
        return _legacy_length(frame, offset, end, legacy, what)

    return legacy_length


def _fixed(size: int, what: str) -> Walk:
    def walk(frame: bytes, offset: int, end: int) -> int:
        return _need(offset, size, end, what)

    return walk


def _sized(flexible: bool, kafka_type: str, what: str) -> Walk:
    """Strings, bytes and records: a length, then that many bytes."""
    read_length = _length_reader(flexible, _INT16 if kafka_type == "string" else _INT32)

    def walk(frame: bytes, offset: int, end: int) -> int:
        length, offset = read_length(frame, offset, end, what)
        return offset if length < 0 else _need(offset, length, end, what)

    return walk


def _array(
    flexible: bool, element: Walk, element_size: int | None, what: str, *, nullable: bool
) -> Walk:
    """A count, then the elements; the count may not exceed the bytes left (Kafka's rule).

    A null count is refused where the schema does not allow null, as Kafka's generated
    readers do ("non-nullable field ... was serialized as null"): kio's reader would hand
    back ``None`` for such an array, and code that iterates the field would fail on it.
    """
    read_count = _length_reader(flexible, _INT32)

    def walk(frame: bytes, offset: int, end: int) -> int:
        count, offset = read_count(frame, offset, end, what)
        if count < 0 and not nullable:
            raise LengthError(f"{what}: null in a non-nullable array")
        if count <= 0:
            return offset
        if count > end - offset:
            raise LengthError(
                f"{what}: {count} entries claimed, only {max(end - offset, 0)} bytes left"
            )
        if element_size is not None:
            return _need(offset, count * element_size, end, what)
        for _ in range(count):
            offset = element(frame, offset, end)
        return offset

    return walk


def _nullable_struct(inner: Walk, what: str) -> Walk:
    """KIP-893: an int8 marker, -1 for null, 1 before a present struct."""

    def walk(frame: bytes, offset: int, end: int) -> int:
        start = offset
        offset = _need(offset, 1, end, what)
        (marker,) = _INT8.unpack_from(frame, start)
        if marker == -1:
            return offset
        if marker != 1:
            raise LengthError(f"{what}: invalid null marker {marker}")
        return inner(frame, offset, end)

    return walk


# -- schemas ----------------------------------------------------------------------------------


@cache
def _entity_walk(schema: type[Entity]) -> Walk:
    flexible = bool(schema.__flexible__)
    plain: list[Walk] = []
    tagged: dict[int, Walk] = {}
    for field in fields(schema):
        tag = field.metadata.get("tag")
        walk = _field_walk(schema, field, flexible, is_tag=tag is not None)
        if tag is None:
            plain.append(walk)
        else:
            tagged[int(tag)] = walk
    name = schema.__name__
    if not flexible:

        def walk_legacy(frame: bytes, offset: int, end: int) -> int:
            for walk in plain:
                offset = walk(frame, offset, end)
            return offset

        return walk_legacy

    def walk_flexible(frame: bytes, offset: int, end: int) -> int:
        for walk in plain:
            offset = walk(frame, offset, end)
        return _tagged_fields(frame, offset, end, tagged, name)

    return walk_flexible


def _tagged_fields(frame: bytes, offset: int, end: int, known: dict[int, Walk], name: str) -> int:
    count, offset = _uvarint(frame, offset, end, f"{name} tagged fields")
    if count > end - offset:
        raise LengthError(f"{name}: {count} tagged fields claimed, {end - offset} bytes left")
    for _ in range(count):
        tag, offset = _uvarint(frame, offset, end, f"{name} tag")
        size, offset = _uvarint(frame, offset, end, f"{name} tag {tag} size")
        window = _need(offset, size, end, f"{name} tag {tag}")
        walk = known.get(tag)
        # kio, like Kafka's generated readers, reads a known tag's value and carries on where
        # the value ends, not where the declared size ends: a value shorter than its size
        # would leave kio reading the rest of the window as the next fields, a layout this
        # walk never checked (a 2 GB allocation from one byte, found by the fuzz suite).
        if walk is not None and (used := walk(frame, offset, window)) != window:
            raise LengthError(
                f"{name} tag {tag} declares {size} bytes, its value holds {used - offset}"
            )
        offset = window
    return offset


def _field_walk(schema: type[Entity], field: Field[Any], flexible: bool, *, is_tag: bool) -> Walk:
    what = f"{schema.__name__}.{field.name}"
    inner_type, is_array, optional = _shape(field.type)
    if schema.__name__ == "RequestHeader" and field.name == "client_id":
        # Kafka keeps the header's client id a legacy string even in flexible headers.
        return _sized(False, "string", what)
    if is_dataclass(inner_type):
        element = _entity_walk(inner_type)  # type: ignore[arg-type]
        if is_array:
            return _array(flexible, element, None, what, nullable=optional)
        return _nullable_struct(element, what) if optional and not is_tag else element
    kafka_type = field.metadata["kafka_type"]
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        if is_array:
            return _array(flexible, _fixed(size, what), size, what, nullable=optional)
        return _fixed(size, what)
    if kafka_type not in _SIZED:
        raise TypeError(f"no bounds rule for kafka_type {kafka_type!r} ({what})")
    element = _sized(flexible, kafka_type, what)
    return _array(flexible, element, None, what, nullable=optional) if is_array else element


def _shape(annotation: Any) -> tuple[Any, bool, bool]:
    """(element type, is an array, is nullable) of a kio field annotation."""
    optional = False
    if get_origin(annotation) in (UnionType, Union):
        args = [arg for arg in get_args(annotation) if arg is not NoneType]
        optional = len(args) < len(get_args(annotation))
        (annotation,) = args
    if get_origin(annotation) is tuple:
        return get_args(annotation)[0], True, optional
    return annotation, False, optional
