"""ApiVersions response bodies, read and rewritten by hand.

The ``api_keys`` array is rewritten, the throttle time copied. The top-level tagged fields of
v3+ (supported features, finalized features and their epoch, ZooKeeper migration) are copied
byte for byte except those holding their default value, which are left out as Kafka's own
serializer leaves them out: librdkafka before 2.2.0 mis-skips tagged fields, and a default
``FinalizedFeaturesEpoch`` of -1 copied from the upstream made it read a huge length and fail
the whole connection (Debian's kcat 1.7.1 could not connect). Tags kio does not know are kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from struct import Struct
from typing import Final

from quotagate.protocol.api_support import VersionRange
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.headers import (
    RESPONSE_CORRELATION_END,
    HeaderError,
    read_uvarint,
    skip_tagged_fields,
)

_FIRST_FLEXIBLE = 3
_INT16 = Struct(">h")
_INT32 = Struct(">i")
_ENTRY = Struct(">hhh")


class ApiVersionsBody:
    """A parsed ApiVersions response frame."""

    __slots__ = ("array_end", "error_code", "flexible", "frame", "ranges")

    def __init__(
        self,
        frame: bytes,
        error_code: int,
        ranges: list[VersionRange],
        array_end: int,
        flexible: bool,
    ) -> None:
        self.frame = frame
        self.error_code = error_code
        self.ranges = ranges
        self.array_end = array_end
        self.flexible = flexible

    def with_ranges(self, ranges: Iterable[VersionRange]) -> bytes:
        """The same frame advertising ``ranges``."""
        entries = list(ranges)
        parts = [self.frame[4:RESPONSE_CORRELATION_END], _INT16.pack(self.error_code)]
        if self.flexible:
            parts.append(_uvarint(len(entries) + 1))
            parts.extend(_ENTRY.pack(*e) + b"\x00" for e in entries)
        else:
            parts.append(_INT32.pack(len(entries)))
            parts.extend(_ENTRY.pack(*e) for e in entries)
        tail = self.frame[self.array_end :]
        parts.append(_without_default_tags(tail) if self.flexible else tail)
        return with_size_prefix(b"".join(parts))


def parse_api_versions(frame: bytes, api_version: int) -> ApiVersionsBody:
    """Parse an ApiVersions response; a broker that did not know the requested version
    answers UNSUPPORTED_VERSION with a v0 body, which is detected and parsed as such."""
    offset = RESPONSE_CORRELATION_END
    if len(frame) < offset + 2:
        raise HeaderError("ApiVersions response too short")
    (error_code,) = _INT16.unpack_from(frame, offset)
    flexible = api_version >= _FIRST_FLEXIBLE and error_code != ErrorCode.UNSUPPORTED_VERSION
    offset += 2
    if flexible:
        count_plus_one, offset = read_uvarint(frame, offset)
        count = max(count_plus_one - 1, 0)
    else:
        if len(frame) < offset + 4:
            raise HeaderError("ApiVersions response too short")
        (count,) = _INT32.unpack_from(frame, offset)
        offset += 4
        count = max(count, 0)
    ranges: list[VersionRange] = []
    for _ in range(count):
        if len(frame) < offset + _ENTRY.size:
            raise HeaderError("ApiVersions response truncated in api_keys")
        ranges.append(VersionRange(*_ENTRY.unpack_from(frame, offset)))
        offset += _ENTRY.size
        if flexible:
            offset = skip_tagged_fields(frame, offset)
    return ApiVersionsBody(frame, error_code, ranges, offset, flexible)


# ApiVersionsResponse v3+ top-level tagged fields and the bytes of their default values:
# SupportedFeatures and FinalizedFeatures empty compact arrays, FinalizedFeaturesEpoch -1,
# ZkMigrationReady false.
_TAG_DEFAULTS: Final[dict[int, bytes]] = {
    0: b"\x01",
    1: b"\xff" * 8,
    2: b"\x01",
    3: b"\x00",
}
_THROTTLE_TIME_BYTES: Final = 4


def _without_default_tags(tail: bytes) -> bytes:
    """``throttle_time_ms`` + tagged fields, minus the tagged fields that hold defaults."""
    if len(tail) < _THROTTLE_TIME_BYTES:
        raise HeaderError("ApiVersions response truncated before throttle_time_ms")
    offset = _THROTTLE_TIME_BYTES
    count, offset = read_uvarint(tail, offset)
    kept: list[bytes] = []
    for _ in range(count):
        start = offset
        tag, offset = read_uvarint(tail, offset)
        size, offset = read_uvarint(tail, offset)
        end = offset + size
        if end > len(tail):
            raise HeaderError("ApiVersions tagged field runs past the end of the frame")
        if _TAG_DEFAULTS.get(tag) != tail[offset:end]:
            kept.append(tail[start:end])
        offset = end
    return tail[:_THROTTLE_TIME_BYTES] + _uvarint(len(kept)) + b"".join(kept) + tail[offset:]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
