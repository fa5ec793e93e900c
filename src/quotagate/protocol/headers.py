"""Request and response headers (``RequestHeader.json`` v0–v2, ``ResponseHeader.json`` v0–v1).

Frames include their size prefix (see :mod:`quotagate.protocol.framing`), so every offset
here counts from the first byte of the prefix.
"""

from __future__ import annotations

from struct import Struct
from typing import Any, ClassVar, Final

from quotagate.protocol import api_table
from quotagate.protocol.errors import ProtocolError
from quotagate.protocol.framing import SIZE_PREFIX

_REQUEST_PREFIX = Struct(">hhih")  # api key, api version, correlation id, client id length
_INT32 = Struct(">i")
_REQUEST_FIXED: Final = SIZE_PREFIX + _REQUEST_PREFIX.size
RESPONSE_CORRELATION_END: Final = SIZE_PREFIX + 4


class HeaderError(ProtocolError):
    """A header that cannot be parsed; the connection must be closed."""

    reason: ClassVar[str] = "bad_header"


class RequestHeader:
    """A request's header; immutable by convention (one is made per request, and a frozen
    dataclass's ``object.__setattr__`` per field costs more than parsing the header)."""

    __slots__ = ("api_key", "api_version", "body_offset", "client_id", "correlation_id")

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        body_offset: int,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body_offset = body_offset
        """Where the body starts in the frame, or -1 for a version kio does not model."""

    def _fields(self) -> tuple[int, int, int, str | None, int]:
        return (
            self.api_key,
            self.api_version,
            self.correlation_id,
            self.client_id,
            self.body_offset,
        )

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
            f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, "
            f"body_offset={self.body_offset})"
        )


def parse_request_header(frame: bytes) -> RequestHeader:
    """Parse the header of a request frame.

    Every request header since v1 starts with api key, version, correlation id and client
    id, so those are read for any API; tagged fields (header v2) are skipped only when kio
    tells the version is flexible, and only then is the body offset known.
    """
    if len(frame) < _REQUEST_FIXED:
        raise HeaderError(f"request of {len(frame) - SIZE_PREFIX} bytes is shorter than a header")
    api_key, api_version, correlation_id, client_id_len = _REQUEST_PREFIX.unpack_from(
        frame, SIZE_PREFIX
    )
    offset = _REQUEST_FIXED
    client_id: str | None = None
    if client_id_len >= 0:
        end = offset + client_id_len
        if end > len(frame):
            raise HeaderError(f"client id of {client_id_len} bytes runs past the end of the frame")
        try:
            client_id = frame[offset:end].decode()
        except UnicodeDecodeError as exc:
            raise HeaderError("client id is not UTF-8") from exc
        offset = end
    elif client_id_len != -1:
        raise HeaderError(f"invalid client id length {client_id_len}")
    header_version = api_table.request_header_version(api_key, api_version)
    if header_version is None:
        offset = -1
    elif header_version >= 2:
        if offset < len(frame) and frame[offset] == 0:
            offset += 1  # no tagged fields, the usual case
        else:
            offset = skip_tagged_fields(frame, offset)
    return RequestHeader(api_key, api_version, correlation_id, client_id, offset)


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Header bytes (no size prefix) for a request kio models."""
    raw_id = b"" if client_id is None else client_id.encode()
    fixed = _REQUEST_PREFIX.pack(
        api_key, api_version, correlation_id, -1 if client_id is None else len(raw_id)
    )
    flexible = api_table.request_header_version(api_key, api_version) == 2
    return fixed + raw_id + (b"\x00" if flexible else b"")


def response_correlation_id(frame: bytes) -> int:
    if len(frame) < RESPONSE_CORRELATION_END:
        raise HeaderError("response shorter than its correlation id")
    value: int = _INT32.unpack_from(frame, SIZE_PREFIX)[0]
    return value


def response_body_offset(frame: bytes, api_key: int, api_version: int) -> int:
    """Where the body of a response frame starts; HeaderError if the version is unmodelled."""
    header_version = api_table.response_header_version(api_key, api_version)
    if header_version is None:
        raise HeaderError(f"no response header version known for api {api_key} v{api_version}")
    if header_version == 0:
        return RESPONSE_CORRELATION_END
    return skip_tagged_fields(frame, RESPONSE_CORRELATION_END)


def encode_response_header(correlation_id: int, api_key: int, api_version: int) -> bytes:
    header = _INT32.pack(correlation_id)
    return header + b"\x00" if api_table.response_header_version(api_key, api_version) else header


def skip_tagged_fields(frame: bytes, offset: int) -> int:
    """Offset just past a tagged-field section starting at ``offset``."""
    count, offset = read_uvarint(frame, offset)
    for _ in range(count):
        _tag, offset = read_uvarint(frame, offset)
        size, offset = read_uvarint(frame, offset)
        offset += size
        if offset > len(frame):
            raise HeaderError("tagged field runs past the end of the frame")
    return offset


def read_uvarint(data: bytes, offset: int) -> tuple[int, int]:
    """Decode an unsigned varint; returns (value, offset after it)."""
    value = 0
    shift = 0
    while True:
        if offset >= len(data):
            raise HeaderError("varint runs past the end of the frame")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise HeaderError("varint longer than 5 bytes")
