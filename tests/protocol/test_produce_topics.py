"""Bytes per topic of a Produce request, read from the raw frame."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.headers import HeaderError, parse_request_header
from quotagate.protocol.kio_nested import build, nested
from quotagate.protocol.produce import produce_acks
from quotagate.protocol.produce_topics import produce_topic_bytes, read_produce
from support import old_frames


def _produce_frame(version: int, topics: list[tuple[str, list[int]]]) -> bytes:
    schema: Any = api_table.request_schema(api_keys.PRODUCE, version)
    topic_cls = nested(schema, "TopicProduceData")
    partition_cls = nested(schema, "PartitionProduceData")
    request = build(
        schema,
        transactional_id="tx" if version >= 3 else None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(
            build(
                topic_cls,
                name=name,
                topic_id=uuid.UUID(int=len(name)),
                partition_data=tuple(
                    build(partition_cls, index=i, records=b"r" * size)
                    for i, size in enumerate(sizes)
                ),
            )
            for name, sizes in topics
        ),
    )
    return codec.encode_request_frame(request, 7, "client")


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_produce_topic_bytes_by_version(version: int) -> None:
    frame = _produce_frame(version, [("alpha", [10, 20]), ("beta", [5]), ("alpha", [1])])
    assert produce_topic_bytes(frame, parse_request_header(frame)) == [("alpha", 31), ("beta", 5)]


def test_produce_topic_ids_from_v13() -> None:
    frame = _produce_frame(13, [("ab", [4])])
    assert produce_topic_bytes(frame, parse_request_header(frame)) == [(str(uuid.UUID(int=2)), 4)]


def test_a_topic_name_that_is_not_utf8_is_a_protocol_error() -> None:
    frame = _produce_frame(9, [("alpha", [10])])
    # Flexible versions length-prefix the name with uvarint(len + 1): swap its bytes.
    broken = frame.replace(b"alpha", b"\xff\xfelph")
    with pytest.raises(HeaderError, match="not UTF-8"):
        produce_topic_bytes(broken, parse_request_header(broken))


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_acks_and_topics_in_one_pass_agree_with_the_acks_reader(version: int) -> None:
    frame = _produce_frame(version, [("alpha", [10, 200]), ("beta", [5])])
    header = parse_request_header(frame)
    acks, topics = read_produce(frame, header)
    assert acks == produce_acks(frame, header) == -1
    assert topics == produce_topic_bytes(frame, header)


@pytest.mark.parametrize("version", [3, 9, 13])
def test_a_produce_body_cut_anywhere_is_a_protocol_error(version: int) -> None:
    # A multi-byte varint (a 200-byte record set) and two topics, so every field is cut once.
    frame = _produce_frame(version, [("alpha", [10, 200]), ("beta", [5])])
    header = parse_request_header(frame)
    # The walk stops before the request's own tagged fields (flexible versions: one byte).
    last = len(frame) - (1 if version >= 9 else 0)
    for end in range(header.body_offset, last):
        with pytest.raises(HeaderError):
            read_produce(frame[:end], header)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_acks_and_topics_of_a_removed_version_without_transactional_id(version: int) -> None:
    frame = old_frames.produce(
        version, old_frames.filler([("alpha", [(0, 10)]), ("beta", [(0, 5)])])
    )
    header = parse_request_header(frame)
    assert read_produce(frame, header) == (1, [("alpha", 10), ("beta", 5)])
    for end in range(header.body_offset, len(frame)):
        with pytest.raises(HeaderError):
            read_produce(frame[:end], header)
