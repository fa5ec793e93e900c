"""A Produce request's acks and bytes per topic, read without decoding or copying record batches.

One flat pass over the request body (transactional id → acks → topics → partitions → record
sets) of any Produce version (v0-2, which Kafka 4.0 removed, have no ``transactional_id``;
their header is known all the same) returns the ``acks`` and each topic's total record-set
size, which is what Kafka's per-topic ``BytesInPerSec`` meter and the usage events' ``topics``
column count. v13+ requests name topics by id; those are returned as the id's string form.

This runs for every metered produce request, so each encoding gets one function over local
variables (a reader object's method call per field cost more than the walk itself), and in
flexible versions the one-byte varint, by far the common case, is read inline; anything
longer goes through :func:`read_uvarint`, which also reports a varint cut short.
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

Topics = list[tuple[str, int]]


def produce_topic_bytes(frame: bytes, header: RequestHeader) -> Topics:
    """[(topic, record bytes)] in request order; a topic listed twice is summed once."""
    return read_produce(frame, header)[1]


def read_produce(frame: bytes, header: RequestHeader) -> tuple[int, Topics]:
    """(acks, [(topic, record bytes)]) of a Produce request, in one pass.

    Raises :class:`HeaderError` for a version without a modelled header and for a body that
    ends early, with the messages :func:`quotagate.protocol.produce.produce_acks` gives up
    to the acks and "produce request truncated" after them.
    """
    offset = header.body_offset
    version = header.api_version
    if offset < 0:
        raise HeaderError(f"produce v{version} is not a known version")
    if version >= _FIRST_FLEXIBLE:
        return _read_flexible(frame, offset, version >= _FIRST_TOPIC_ID)
    return _read_classic(frame, offset, version >= _FIRST_WITH_TRANSACTIONAL_ID)


def _read_classic(frame: bytes, offset: int, transactional: bool) -> tuple[int, Topics]:
    """v0–v8: int16-prefixed strings, int32-prefixed arrays and bytes."""
    end = len(frame)
    if transactional:
        if offset + 2 > end:
            raise HeaderError("produce request truncated before transactional id")
        offset += 2 + max(_INT16.unpack_from(frame, offset)[0], 0)
    if offset + 2 > end:
        raise HeaderError("produce request truncated before acks")
    acks: int = _INT16.unpack_from(frame, offset)[0]
    offset += 2 + 4  # acks, timeout_ms
    topics: Topics = []
    if offset + 4 > end:
        raise _truncated()
    topic_count = _INT32.unpack_from(frame, offset)[0]
    offset += 4
    for _ in range(topic_count):
        if offset + 2 > end:
            raise _truncated()
        length = _INT16.unpack_from(frame, offset)[0]
        offset += 2
        topic = ""
        if length > 0:
            offset += length
            if offset > end:
                raise _truncated()
            topic = _topic_name(frame, offset - length, offset)
        if offset + 4 > end:
            raise _truncated()
        partition_count = _INT32.unpack_from(frame, offset)[0]
        offset += 4
        size = 0
        for _ in range(partition_count):
            offset += 4  # partition index
            if offset + 4 > end:
                raise _truncated()
            length = _INT32.unpack_from(frame, offset)[0]  # records: nullable bytes
            offset += 4
            if length > 0:
                offset += length
                if offset > end:
                    raise _truncated()
                size += length
        topics.append((topic, size))
    return acks, topics if len(topics) < 2 else _merged(topics)


def _read_flexible(frame: bytes, offset: int, topic_ids: bool) -> tuple[int, Topics]:
    """v9+: uvarint (length + 1) prefixes and tagged-field sections.

    Each varint is read as ``byte if byte < 0x80`` inline, else by :func:`read_uvarint`
    (which also reports one cut short); each tagged-field section as a 0 byte inline, else
    by :func:`skip_tagged_fields`. A byte past the end reads as 0x80 / 1: the slow path.
    """
    end = len(frame)
    length, offset = _uvarint(frame, offset)  # transactional_id
    offset += max(length - 1, 0)
    if offset + 2 > end:
        raise HeaderError("produce request truncated before acks")
    acks: int = _INT16.unpack_from(frame, offset)[0]
    offset += 2 + 4  # acks, timeout_ms
    if offset > end:
        raise _truncated()
    topics: Topics = []
    topic_count, offset = _uvarint(frame, offset)
    for _ in range(topic_count - 1):
        if topic_ids:
            offset += 16
            if offset > end:
                raise _truncated()
            topic = str(uuid.UUID(bytes=frame[offset - 16 : offset]))
        else:
            length = frame[offset] if offset < end else 0x80
            if length < 0x80:
                offset += 1
            else:
                length, offset = read_uvarint(frame, offset)
            topic = ""
            if length > 1:
                offset += length - 1
                if offset > end:
                    raise _truncated()
                topic = _topic_name(frame, offset - length + 1, offset)
        partition_count = frame[offset] if offset < end else 0x80
        if partition_count < 0x80:
            offset += 1
        else:
            partition_count, offset = read_uvarint(frame, offset)
        size = 0
        for _ in range(partition_count - 1):
            offset += 4  # partition index
            if offset > end:
                raise _truncated()
            length = frame[offset] if offset < end else 0x80  # records: nullable bytes
            if length < 0x80:
                offset += 1
            else:
                length, offset = read_uvarint(frame, offset)
            if length > 1:
                offset += length - 1
                if offset > end:
                    raise _truncated()
                size += length - 1
            if (frame[offset] if offset < end else 1) == 0:
                offset += 1
            else:
                offset = skip_tagged_fields(frame, offset)
        if (frame[offset] if offset < end else 1) == 0:
            offset += 1
        else:
            offset = skip_tagged_fields(frame, offset)
        topics.append((topic, size))
    return acks, topics if len(topics) < 2 else _merged(topics)


def _merged(topics: Topics) -> Topics:
    """A topic listed twice counted once, at its first place."""
    totals: dict[str, int] = {}
    for topic, size in topics:
        totals[topic] = totals.get(topic, 0) + size
    return list(totals.items())


def _truncated() -> HeaderError:
    return HeaderError("produce request truncated")


def _topic_name(frame: bytes, start: int, end: int) -> str:
    try:
        return frame[start:end].decode()
    except UnicodeDecodeError:
        raise HeaderError("produce request has a topic name that is not UTF-8") from None


def _uvarint(frame: bytes, offset: int) -> tuple[int, int]:
    if offset < len(frame) and frame[offset] < 0x80:
        return frame[offset], offset + 1
    return read_uvarint(frame, offset)
