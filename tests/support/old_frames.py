"""Request and response frames of versions Kafka 4.0 removed, written field by field from
Kafka's 3.x JSON schemas (kio, which models 4.2, cannot write them). ``records`` are raw
bytes: the tests pass either filler or a real record batch."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from quotagate.protocol import api_keys
from quotagate.protocol.framing import with_size_prefix

Partitions = Sequence[tuple[int, bytes]]


def string(value: str) -> bytes:
    return struct.pack(">h", len(value)) + value.encode()


def request(
    api_key: int, version: int, body: bytes, client_id: str = "old", correlation_id: int = 7
) -> bytes:
    header = struct.pack(">hhi", api_key, version, correlation_id) + string(client_id)
    return with_size_prefix(header + body)


def produce(
    version: int,
    topics: Sequence[tuple[str, Partitions]],
    *,
    acks: int = 1,
    client_id: str = "old",
    correlation_id: int = 7,
) -> bytes:
    """Produce v0-2: acks, timeout_ms, [topic, [partition, records]]."""
    body = struct.pack(">hi", acks, 30_000) + struct.pack(">i", len(topics))
    for name, partitions in topics:
        body += string(name) + struct.pack(">i", len(partitions))
        for index, records in partitions:
            body += struct.pack(">ii", index, len(records)) + records
    return request(api_keys.PRODUCE, version, body, client_id, correlation_id)


def filler(topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> list[tuple[str, Partitions]]:
    """Topics whose partitions carry ``size`` bytes of filler instead of record batches."""
    return [(name, [(i, b"r" * size) for i, size in parts]) for name, parts in topics]


def produce_response(
    version: int, entries: Sequence[tuple[str, int, int, int]], throttle_ms: int = 0
) -> bytes:
    """[(topic, partition, error, base offset)], one partition each, correlation id 7."""
    body = struct.pack(">i", len(entries))
    for name, partition, error, offset in entries:
        body += string(name) + struct.pack(">iihq", 1, partition, error, offset)
        if version >= 2:
            body += struct.pack(">q", -1)  # log_append_time
    if version >= 1:
        body += struct.pack(">i", throttle_ms)
    return with_size_prefix(struct.pack(">i", 7) + body)


def fetch(
    version: int,
    topics: Sequence[tuple[str, Sequence[int]]],
    *,
    replica_id: int = -1,
    client_id: str = "old",
    correlation_id: int = 7,
) -> bytes:
    """Fetch v0-3 of each partition from offset 0."""
    body = struct.pack(">iii", replica_id, 100, 1)
    if version >= 3:
        body += struct.pack(">i", 1 << 20)
    body += struct.pack(">i", len(topics))
    for name, partitions in topics:
        body += string(name) + struct.pack(">i", len(partitions))
        for partition in partitions:
            body += struct.pack(">iqi", partition, 0, 1 << 20)
    return request(api_keys.FETCH, version, body, client_id, correlation_id)


def create_topics(
    version: int,
    topics: Sequence[tuple[str, int]],
    *,
    validate_only: bool = False,
    client_id: str = "old",
    correlation_id: int = 7,
) -> bytes:
    """CreateTopics v0-1 of ``(name, partitions)``, replication factor 1, no assignments."""
    body = struct.pack(">i", len(topics))
    for name, partitions in topics:
        body += string(name) + struct.pack(">ih", partitions, 1) + struct.pack(">ii", 0, 0)
    body += struct.pack(">i", 30_000)
    if version >= 1:
        body += b"\x01" if validate_only else b"\x00"
    return request(api_keys.CREATE_TOPICS, version, body, client_id, correlation_id)


def delete_topics(
    names: Sequence[str], *, client_id: str = "old", correlation_id: int = 7
) -> bytes:
    """DeleteTopics v0."""
    body = struct.pack(">i", len(names)) + b"".join(string(n) for n in names)
    return request(
        api_keys.DELETE_TOPICS, 0, body + struct.pack(">i", 30_000), client_id, correlation_id
    )
