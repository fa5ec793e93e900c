"""kio adapters: decode and encode bodies of the API versions kio models.

kio raises on unknown tagged fields and does not re-encode byte for byte, so callers decode
only what they need to read or change and keep forwarding the original bytes otherwise.
Any kio failure surfaces as :class:`CodecError`.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import cache
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

from quotagate.protocol import api_keys, api_table, removed_versions
from quotagate.protocol.bounds import LengthError, check_body
from quotagate.protocol.errors import ProtocolError
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.headers import (
    HeaderError,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    response_body_offset,
)

_MUTATION_KEYS = frozenset({api_keys.CREATE_TOPICS, api_keys.DELETE_TOPICS})


class CodecError(ProtocolError):
    """A body kio cannot decode or encode."""

    reason: ClassVar[str] = "bad_body"


@cache
def _reader(schema: type[Entity]) -> Callable[[bytes, int], tuple[Any, int]]:
    reader: Callable[[bytes, int], tuple[Any, int]] = entity_reader(schema)
    return reader


@cache
def _writer(schema: type[Entity]) -> Callable[[io.BytesIO, Any], None]:
    writer: Callable[[io.BytesIO, Any], None] = entity_writer(schema)
    return writer


def decode_body(schema: type[Entity], frame: bytes, offset: int) -> Any:
    """Decode the body at ``offset`` up to the end of ``frame`` with ``schema``.

    The bounds walk runs first: kio's native reader allocates by declared length and would
    abort the process on a lie, so it only ever sees bodies whose lengths the frame backs.
    """
    try:
        check_body(schema, frame, offset)
    except LengthError as exc:
        raise CodecError(f"cannot decode {schema.__name__}: {exc}") from exc
    try:
        entity, size = _reader(schema)(frame, offset)
    except Exception as exc:  # kio raises many types, native ones included
        raise CodecError(f"cannot decode {schema.__name__}: {exc}") from exc
    if offset + size != len(frame):
        raise CodecError(f"{schema.__name__} leaves {len(frame) - offset - size} trailing bytes")
    return entity


def encode_body(entity: Any) -> bytes:
    buffer = io.BytesIO()
    schema: type[Entity] = type(entity)
    try:
        _writer(schema)(buffer, entity)
    except Exception as exc:
        raise CodecError(f"cannot encode {type(entity).__name__}: {exc}") from exc
    return buffer.getvalue()


def decode_request(frame: bytes, header: RequestHeader) -> Any:
    if header.body_offset < 0 or not api_table.is_modelled(header.api_key, header.api_version):
        raise CodecError(f"api {header.api_key} v{header.api_version} is not modelled")
    schema = api_table.request_schema(header.api_key, header.api_version)
    return decode_body(schema, frame, header.body_offset)


def check_request(frame: bytes, header: RequestHeader) -> None:
    """Refuse a request whose body declares lengths its frame cannot back, without decoding.

    The removed versions of CreateTopics and DeleteTopics are walked by hand (a topic count
    lie in CreateTopics is what made tansu ask for 206 GB); other versions kio does not model
    pass (nothing describes their fields)."""
    if header.body_offset < 0:
        return
    if not api_table.is_modelled(header.api_key, header.api_version):
        if header.api_key in _MUTATION_KEYS and api_table.is_removed(
            header.api_key, header.api_version
        ):
            try:
                removed_versions.read_mutation(frame, header)
            except HeaderError as exc:
                raise CodecError(f"{api_table.api_name(header.api_key)}: {exc}") from exc
        return
    schema = api_table.request_schema(header.api_key, header.api_version)
    try:
        check_body(schema, frame, header.body_offset)
    except LengthError as exc:
        raise CodecError(f"{schema.__name__}: {exc}") from exc


def decode_response(frame: bytes, api_key: int, api_version: int) -> Any:
    if not api_table.is_modelled(api_key, api_version):
        raise CodecError(f"api {api_key} v{api_version} is not modelled")
    try:
        offset = response_body_offset(frame, api_key, api_version)
    except HeaderError as exc:
        raise CodecError(str(exc)) from exc
    return decode_body(api_table.response_schema(api_key, api_version), frame, offset)


def encode_request_frame(entity: Any, correlation_id: int, client_id: str | None) -> bytes:
    """A complete request frame for a kio request entity."""
    header = encode_request_header(
        int(entity.__api_key__), int(entity.__version__), correlation_id, client_id
    )
    return with_size_prefix(header + encode_body(entity))


def encode_response_frame(entity: Any, correlation_id: int) -> bytes:
    """A complete response frame for a kio response entity."""
    header = encode_response_header(
        correlation_id, int(entity.__api_key__), int(entity.__version__)
    )
    return with_size_prefix(header + encode_body(entity))


def replace_response_body(frame: bytes, api_key: int, api_version: int, entity: Any) -> bytes:
    """``frame`` with its body replaced, keeping the original header bytes."""
    try:
        offset = response_body_offset(frame, api_key, api_version)
    except HeaderError as exc:
        raise CodecError(str(exc)) from exc
    return with_size_prefix(frame[4:offset] + encode_body(entity))
