"""Bytes per topic of a Produce request, read without decoding or copying record batches.

Walks the request body (topics → partitions → records) of any Produce version (v0-2, which
Kafka 4.0 removed, have no ``transactional_id``; their header is known all the same) and
returns each topic's total record-set size, which is what Kafka's per-topic ``BytesInPerSec``
meter and the usage events' ``topics`` column count. v13+ requests name topics by id; those
are returned as the id's string form.
"""

from __future__ import annotations

import uuid
from struct import Struct

from quotagate.protocol.headers import HeaderError, RequestHeader, read_uvarint, skip_tagged_fields

_INT16 = Struct(">h")
_INT32 = Struct(">i")
_FIRST_WITH_TRANSACTIONAL_ID = 3
_FIRST_FLEXIBLE = 9
_FIRST_TOPIC_ID = 13


def produce_topic_bytes(frame: bytes, header: RequestHeader) -> list[tuple[str, int]]:
    """[(topic, record bytes)] in request order; a topic listed twice is summed once."""
    offset = header.body_offset
    if offset < 0:
        raise HeaderError(f"produce v{header.api_version} is not a known version")
    flexible = header.api_version >= _FIRST_FLEXIBLE
    reader = _Reader(frame, offset, flexible)
    if header.api_version >= _FIRST_WITH_TRANSACTIONAL_ID:
        reader.skip_string()  # transactional_id
    reader.skip(2 + 4)  # acks, timeout_ms
    totals: dict[str, int] = {}
    for _ in range(reader.array_length()):
        if header.api_version >= _FIRST_TOPIC_ID:
            topic = str(uuid.UUID(bytes=reader.take(16)))
        else:
            topic = reader.string()
        size = 0
        for _ in range(reader.array_length()):
            reader.skip(4)  # partition index
            size += reader.skip_bytes()
            reader.skip_tags()
        reader.skip_tags()
        totals[topic] = totals.get(topic, 0) + size
    return list(totals.items())


class _Reader:
    __slots__ = ("flexible", "frame", "offset")

    def __init__(self, frame: bytes, offset: int, flexible: bool) -> None:
        self.frame = frame
        self.offset = offset
        self.flexible = flexible

    def skip(self, n: int) -> None:
        self.offset += n
        if self.offset > len(self.frame):
            raise HeaderError("produce request truncated")

    def take(self, n: int) -> bytes:
        start = self.offset
        self.skip(n)
        return self.frame[start : self.offset]

    def _length(self) -> int:
        """Length of a (compact) nullable string/bytes/array; -1 for null."""
        if self.flexible:
            value, self.offset = read_uvarint(self.frame, self.offset)
            return value - 1
        if self.offset + 4 > len(self.frame):
            raise HeaderError("produce request truncated")
        return int(_INT32.unpack_from(self.frame, self.offset)[0])

    def _string_length(self) -> int:
        if self.flexible:
            value, self.offset = read_uvarint(self.frame, self.offset)
            return value - 1
        if self.offset + 2 > len(self.frame):
            raise HeaderError("produce request truncated")
        length = int(_INT16.unpack_from(self.frame, self.offset)[0])
        self.offset += 2
        return length

    def array_length(self) -> int:
        length = self._length()
        if not self.flexible:
            self.offset += 4
        return max(length, 0)

    def string(self) -> str:
        length = self._string_length()
        if length <= 0:
            return ""
        try:
            return self.take(length).decode()
        except UnicodeDecodeError:
            raise HeaderError("produce request has a topic name that is not UTF-8") from None

    def skip_string(self) -> None:
        length = self._string_length()
        if length > 0:
            self.skip(length)

    def skip_bytes(self) -> int:
        length = self._length()
        if not self.flexible:
            self.offset += 4
        if length > 0:
            self.skip(length)
        return max(length, 0)

    def skip_tags(self) -> None:
        if self.flexible:
            self.offset = skip_tagged_fields(self.frame, self.offset)
