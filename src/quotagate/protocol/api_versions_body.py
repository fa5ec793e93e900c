"""ApiVersions response bodies, read and rewritten by hand.

The ``api_keys`` array is rewritten, the throttle time copied. The top-level tagged fields of
v3+ (supported features, finalized features and their epoch, ZooKeeper migration) are copied
byte for byte, but for the feature levels ``FEATURE_CAPS`` lowers (in place: a level is two
bytes whatever its value) and those holding their default value, which are left out as Kafka's
own serializer leaves them out: librdkafka before 2.2.0 mis-skips tagged fields, and a default
``FinalizedFeaturesEpoch`` of -1 copied from the upstream made it read a huge length and fail
the whole connection (Debian's kcat 1.7.1 could not connect). Tags kio does not know are kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from struct import Struct
from typing import Final

from quotagate.protocol.api_support import FEATURE_CAPS, VersionRange
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
            field = tail[start:end]
            if tag in _FEATURE_TAGS and FEATURE_CAPS:
                field = field[: offset - start] + _capped_features(tail[offset:end], tag)
            kept.append(field)
        offset = end
    return tail[:_THROTTLE_TIME_BYTES] + _uvarint(len(kept)) + b"".join(kept) + tail[offset:]


# SupportedFeatures (tag 0): name, min_version, max_version; FinalizedFeatures (tag 2): name,
# max_version_level, min_version_level. Where each entry's maximum and minimum are.
_FEATURE_TAGS: Final[dict[int, tuple[int, int]]] = {0: (2, 0), 2: (0, 2)}
_LEVEL = Struct(">h")


def _capped_features(array: bytes, tag: int) -> bytes:
    """A feature array (compact, entries with tagged fields) with every feature named in
    ``FEATURE_CAPS`` at most at its cap."""
    out = bytearray(array)
    count_plus_one, offset = read_uvarint(array, 0)
    max_at, min_at = _FEATURE_TAGS[tag]
    for _ in range(max(count_plus_one - 1, 0)):
        length_plus_one, offset = read_uvarint(array, offset)
        name_end = offset + max(length_plus_one - 1, 0)
        if name_end + 4 > len(array):
            raise HeaderError("ApiVersions feature entry runs past its field")
        cap = FEATURE_CAPS.get(array[offset:name_end].decode("utf-8", "replace"))
        if cap is not None:
            for at in (name_end + max_at, name_end + min_at):
                (level,) = _LEVEL.unpack_from(array, at)
                _LEVEL.pack_into(out, at, min(level, cap))
        offset = skip_tagged_fields(array, name_end + 4)
    return bytes(out)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
