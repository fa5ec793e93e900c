"""Request and response bodies of the metered APIs' versions Kafka 4.0 removed, by hand.

kio models Kafka 4.2, which dropped Produce v0-2, Fetch v0-3, CreateTopics v0-1 and
DeleteTopics v0 (KIP-896). Old clients still send them (sarama with an old ``Version``,
kafka-go, scripts), and a quota stage has to read them to meter them: these versions are
all non-flexible (request header v1, response header v0, int16-length strings, int32-count
arrays), small and frozen, so a bounds-checked walk is enough. Fields are named as in
Kafka's JSON schemas.

* Produce v0-2: record bytes per topic (``produce_topics``), the byte span of each topic so
  refused topics can be cut out of the request, and the response entries of refused topics.
* Fetch v0-3: ``max_bytes`` (v3) to cap and the empty response of a throttled fetch, and the
  requested partitions, for an UNSUPPORTED_VERSION answer in that shape (v0-2).
* CreateTopics v0-1, DeleteTopics v0: the topics and partition counts a mutation quota
  charges, ``validate_only``, and the per-topic results of the response.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from typing import Final

from quotagate.protocol import api_keys
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.headers import (
    RESPONSE_CORRELATION_END,
    HeaderError,
    RequestHeader,
)

_INT16 = Struct(">h")
_INT32 = Struct(">i")
_INT64 = Struct(">q")
_PRODUCE_V1_THROTTLE: Final = 1
_PRODUCE_V2_APPEND_TIME: Final = 2
_FETCH_V1_THROTTLE: Final = 1
_FETCH_V3_MAX_BYTES: Final = 3
_CREATE_TOPICS_V1_MESSAGE: Final = 1


class _Reader:
    """A bounds-checked cursor over a non-flexible body."""

    __slots__ = ("frame", "offset")

    def __init__(self, frame: bytes, offset: int) -> None:
        if offset < 0:
            raise HeaderError("request header of an unknown version")
        self.frame = frame
        self.offset = offset

    def _take(self, n: int) -> int:
        start = self.offset
        if n < 0 or start + n > len(self.frame):
            raise HeaderError("body truncated")
        self.offset = start + n
        return start

    def int8(self) -> int:
        return self.frame[self._take(1)]

    def int16(self) -> int:
        value: int = _INT16.unpack_from(self.frame, self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.frame, self._take(4))[0]
        return value

    def skip(self, n: int) -> None:
        self._take(n)

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise HeaderError("null where a topic name is required")
        start = self._take(length)
        try:
            return self.frame[start : self.offset].decode()
        except UnicodeDecodeError:
            raise HeaderError("a topic name that is not UTF-8") from None

    def skip_nullable_string(self) -> None:
        length = self.int16()
        if length > 0:
            self._take(length)

    def skip_bytes(self) -> int:
        length = self.int32()
        if length > 0:
            self._take(length)
        return max(length, 0)

    def count(self) -> int:
        """An array's length; -1 (null) reads as empty. Each entry takes at least one byte,
        so a count the frame cannot back is refused before anything loops over it."""
        length = self.int32()
        if length > len(self.frame) - self.offset:
            raise HeaderError(f"array of {length} entries in {len(self.frame) - self.offset} bytes")
        return max(length, 0)

    def end(self) -> None:
        if self.offset != len(self.frame):
            raise HeaderError(f"{len(self.frame) - self.offset} trailing bytes")


def _string(value: str) -> bytes:
    raw = value.encode()
    return _INT16.pack(len(raw)) + raw


def _nullable_string(value: str | None) -> bytes:
    return _INT16.pack(-1) if value is None else _string(value)


def _response(correlation_id: int, *parts: bytes) -> bytes:
    return with_size_prefix(_INT32.pack(correlation_id) + b"".join(parts))


# -- Produce v0-2 -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str
    partitions: tuple[int, ...]
    record_bytes: int
    start: int
    """Where the topic's entry starts in the frame."""
    end: int


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    acks: int
    topics_offset: int
    """Where the ``topic_data`` array (its count) starts in the frame."""
    topics: tuple[ProduceTopic, ...]


def read_produce(frame: bytes, header: RequestHeader) -> ProduceRequest:
    """Produce v0-2: acks, timeout, [topic, [partition, records]]."""
    reader = _Reader(frame, header.body_offset)
    acks = reader.int16()
    reader.skip(4)  # timeout_ms
    topics_offset = reader.offset
    topics: list[ProduceTopic] = []
    for _ in range(reader.count()):
        start = reader.offset
        name = reader.string()
        partitions: list[int] = []
        size = 0
        for _ in range(reader.count()):
            partitions.append(reader.int32())
            size += reader.skip_bytes()
        topics.append(ProduceTopic(name, tuple(partitions), size, start, reader.offset))
    reader.end()
    return ProduceRequest(acks, topics_offset, tuple(topics))


def produce_without(frame: bytes, request: ProduceRequest, refused: set[str]) -> bytes:
    """The request frame with the topics named in ``refused`` left out, bytes kept as sent."""
    kept = [t for t in request.topics if t.name not in refused]
    return with_size_prefix(
        frame[4 : request.topics_offset]
        + _INT32.pack(len(kept))
        + b"".join(frame[t.start : t.end] for t in kept)
    )


def _produce_entries(version: int, topics: list[ProduceTopic], error: int) -> bytes:
    parts: list[bytes] = []
    for topic in topics:
        parts.append(_string(topic.name) + _INT32.pack(len(topic.partitions)))
        for partition in topic.partitions:
            # base_offset -1, and log_append_time -1 (v2) as Kafka answers a failed partition.
            parts.append(_INT32.pack(partition) + _INT16.pack(error) + _INT64.pack(-1))
            if version >= _PRODUCE_V2_APPEND_TIME:
                parts.append(_INT64.pack(-1))
    return b"".join(parts)


def produce_refused_response(
    correlation_id: int, version: int, topics: list[ProduceTopic], error: int
) -> bytes:
    """A whole Produce v0-2 response answering ``topics`` with ``error``."""
    throttle = _INT32.pack(0) if version >= _PRODUCE_V1_THROTTLE else b""
    entries = _produce_entries(version, topics, error)
    return _response(correlation_id, _INT32.pack(len(topics)), entries, throttle)


def produce_response_with(
    frame: bytes, version: int, topics: list[ProduceTopic], error: int
) -> bytes:
    """The upstream's Produce v0-2 response with ``topics`` appended, answered ``error``."""
    offset = RESPONSE_CORRELATION_END
    reader = _Reader(frame, offset)
    count = reader.count()
    for _ in range(count):
        reader.string()
        for _ in range(reader.count()):
            reader.skip(4 + 2 + 8 + (8 if version >= _PRODUCE_V2_APPEND_TIME else 0))
    entries_end = reader.offset
    if version >= _PRODUCE_V1_THROTTLE:
        reader.skip(4)
    reader.end()
    return with_size_prefix(
        frame[4:offset]
        + _INT32.pack(count + len(topics))
        + frame[offset + 4 : entries_end]
        + _produce_entries(version, topics, error)
        + frame[entries_end:]
    )


# -- Fetch v0-3 ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    min_bytes: int
    max_bytes: int
    """The response size limit, v3 only (-1 before: the broker's own limit applies)."""
    topics: tuple[tuple[str, tuple[int, ...]], ...]


def read_fetch(frame: bytes, header: RequestHeader) -> FetchRequest:
    """Fetch v0-3: replica_id, max_wait_ms, min_bytes, (v3) max_bytes,
    [topic, [partition, fetch_offset, partition_max_bytes]]."""
    reader = _Reader(frame, header.body_offset)
    replica_id = reader.int32()
    reader.skip(4)  # max_wait_ms
    min_bytes = reader.int32()
    max_bytes = reader.int32() if header.api_version >= _FETCH_V3_MAX_BYTES else -1
    topics: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(reader.count()):
        name = reader.string()
        partitions: list[int] = []
        for _ in range(reader.count()):
            partitions.append(reader.int32())
            reader.skip(8 + 4)
        topics.append((name, tuple(partitions)))
    reader.end()
    return FetchRequest(replica_id, min_bytes, max_bytes, tuple(topics))


def fetch_capped(frame: bytes, header: RequestHeader, max_bytes: int, min_bytes: int) -> bytes:
    """A Fetch v3 request frame with ``min_bytes`` and ``max_bytes`` replaced in place."""
    if header.api_version < _FETCH_V3_MAX_BYTES:
        raise HeaderError(f"fetch v{header.api_version} has no max_bytes")
    spliced = bytearray(frame)
    _INT32.pack_into(spliced, header.body_offset + 8, min_bytes)
    _INT32.pack_into(spliced, header.body_offset + 12, max_bytes)
    return bytes(spliced)


def fetch_empty_response(correlation_id: int, version: int, throttle_ms: int) -> bytes:
    """What a broker sends for a throttled Fetch v1-3: the throttle time and no topics."""
    if version < _FETCH_V1_THROTTLE:
        raise HeaderError("fetch v0 has no throttle_time_ms")
    return _response(correlation_id, _INT32.pack(throttle_ms), _INT32.pack(0))


def fetch_error_response(
    correlation_id: int, version: int, request: FetchRequest, error: int
) -> bytes:
    """A Fetch v0-3 response answering every requested partition with ``error``: high
    watermark -1 and no records, as a broker answers a partition it refuses."""
    parts = [_INT32.pack(0)] if version >= _FETCH_V1_THROTTLE else []
    parts.append(_INT32.pack(len(request.topics)))
    for name, partitions in request.topics:
        parts.append(_string(name) + _INT32.pack(len(partitions)))
        for partition in partitions:
            parts.append(_INT32.pack(partition) + _INT16.pack(error) + _INT64.pack(-1))
            parts.append(_INT32.pack(0))  # records: empty
    return _response(correlation_id, *parts)


# -- CreateTopics v0-1, DeleteTopics v0 ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """The fields of a CreateTopics topic the mutation quota reads (as kio names them)."""

    name: str
    num_partitions: int
    assignments: tuple[int, ...]
    """Partition indexes of the manual assignments (their brokers are not needed)."""


@dataclass(frozen=True, slots=True)
class MutationRequest:
    topics: tuple[CreatableTopic, ...] | tuple[str, ...]
    validate_only: bool


def read_mutation(frame: bytes, header: RequestHeader) -> MutationRequest:
    """CreateTopics v0-1: [name, num_partitions, replication_factor, [partition, [broker]],
    [config name, nullable value]], timeout_ms, (v1) validate_only.
    DeleteTopics v0: [name], timeout_ms."""
    reader = _Reader(frame, header.body_offset)
    if header.api_key == api_keys.DELETE_TOPICS:
        names = tuple(reader.string() for _ in range(reader.count()))
        reader.skip(4)
        reader.end()
        return MutationRequest(names, False)
    if header.api_key != api_keys.CREATE_TOPICS:
        raise HeaderError(f"api {header.api_key} is not a removed mutation version")
    topics: list[CreatableTopic] = []
    for _ in range(reader.count()):
        name = reader.string()
        num_partitions = reader.int32()
        reader.skip(2)
        assignments: list[int] = []
        for _ in range(reader.count()):
            assignments.append(reader.int32())
            reader.skip(4 * reader.count())
        for _ in range(reader.count()):
            reader.string()
            reader.skip_nullable_string()
        topics.append(CreatableTopic(name, num_partitions, tuple(assignments)))
    reader.skip(4)
    validate_only = header.api_version >= 1 and reader.int8() != 0
    reader.end()
    return MutationRequest(tuple(topics), validate_only)


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: int


def read_mutation_results(frame: bytes, api_key: int, api_version: int) -> list[TopicResult]:
    """The per-topic results of a CreateTopics v0-1 or DeleteTopics v0 response."""
    reader = _Reader(frame, RESPONSE_CORRELATION_END)
    results: list[TopicResult] = []
    for _ in range(reader.count()):
        name = reader.string()
        results.append(TopicResult(name, reader.int16()))
        if api_key == api_keys.CREATE_TOPICS and api_version >= _CREATE_TOPICS_V1_MESSAGE:
            reader.skip_nullable_string()
    reader.end()
    return results
