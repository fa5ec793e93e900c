"""Cases the fuzz suite found, kept as plain tests."""

from __future__ import annotations

import struct
import uuid
from datetime import timedelta
from typing import Any

import pytest

from fuzz.cases import (
    MAX_UPSTREAM_PARTITIONS,
    NULL_TOPICS_FRAME,
    UpstreamGuard,
    legal_topic_name,
)
from fuzz.worker import DecodeWorker
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.bounds import LengthError, check_body
from quotagate.protocol.headers import parse_request_header, response_body_offset
from quotagate.protocol.kio_nested import build, nested

# A Fetch v12 response one of whose partitions carries tag 1 (current_leader) declaring 13 bytes
# for a 9-byte value: one byte of a valid frame lowered from 02 to 01. The bounds walk skipped
# the 4 spare bytes; kio read on from the value's end and asked for 2 GB (a Rust abort).
SHORT_TAG_FETCH_RESPONSE = bytes.fromhex(
    "00000092000000070000000000ffff8000000002010480000000ffff80000000000000008000"
    "00000000000080000000000000000080000000000080000000ffff8000000000000000800000"
    "0000000000000000000000000100800000000001010d80000000000000000000000000ffffff"
    "ffffff80000000000000008000000000000000ffffffffffffffff008000000000000000"
)


def test_null_in_a_non_nullable_compact_array_is_a_codec_error() -> None:
    # kio decoded it as topics=None; the controller-mutation stage then failed iterating it
    # (a stage_failed traceback) instead of closing the connection as a protocol error.
    header = parse_request_header(NULL_TOPICS_FRAME)
    with pytest.raises(codec.CodecError, match=r"topics: null in a non-nullable array"):
        codec.decode_request(NULL_TOPICS_FRAME, header)


def test_null_in_a_non_nullable_legacy_array_is_a_codec_error() -> None:
    schema = api_table.request_schema(api_keys.CREATE_TOPICS, 2)
    body = struct.pack(">iib", -1, 0, 0)  # topics: null, timeout 0, validate_only false
    with pytest.raises(codec.CodecError, match=r"topics: null in a non-nullable array"):
        codec.decode_body(schema, body, 0)


def test_null_stays_allowed_where_the_schema_allows_it() -> None:
    # Metadata v1+ sends a null topics array for "all topics".
    schema = api_table.request_schema(api_keys.METADATA, 4)
    body = struct.pack(">ib", -1, 1)  # topics: null, allow_auto_topic_creation true
    assert codec.decode_body(schema, body, 0).topics is None


def test_a_tagged_value_shorter_than_its_declared_size_is_refused() -> None:
    schema = api_table.response_schema(api_keys.FETCH, 12)
    offset = response_body_offset(SHORT_TAG_FETCH_RESPONSE, api_keys.FETCH, 12)
    with pytest.raises(LengthError, match=r"PartitionData tag 1 declares 13 bytes, .* holds 9"):
        check_body(schema, SHORT_TAG_FETCH_RESPONSE, offset)


def test_a_tagged_value_shorter_than_its_declared_size_cannot_abort(
    decode_worker: DecodeWorker,
) -> None:
    # In the capped child: were the walk to let it through again, the child dies, not pytest.
    outcome = decode_worker.decode("response", api_keys.FETCH, 12, SHORT_TAG_FETCH_RESPONSE)
    assert outcome["outcome"] == "refused", outcome
    assert "tag 1 declares 13 bytes" in outcome["error"]


# The live test's lost messages: DeleteTopics v6 of a topic named "" (the fuzz case as sent,
# a uvarint lie at offset 50 of a generated frame). An earlier case had created "" on tansu,
# which keeps records under paths made of topic names: deleting "" emptied every topic.
DELETE_EMPTY_NAMED_TOPIC = bytes.fromhex(
    "0000004b001400060000001a000466757a7a00040100000000000000000000000000000000000079f087c1a8"
    "ad821a578db3979210f87f0000fa385bc0af616f7e266ce4c54bac8a7d00000008f700"
)


def _request(api_key: int, version: int, **fields: Any) -> bytes:
    schema: Any = api_table.request_schema(api_key, version)
    return codec.encode_request_frame(build(schema, **fields), 7, "fuzz")


def _create_topics(name: str, partitions: int = 1) -> bytes:
    schema: Any = api_table.request_schema(api_keys.CREATE_TOPICS, 5)
    topic = build(
        nested(schema, "CreatableTopic"),
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    return _request(
        api_keys.CREATE_TOPICS,
        5,
        topics=(topic,),
        timeout=timedelta(seconds=5),
        validate_only=False,
    )


def _metadata(name: str) -> bytes:
    schema: Any = api_table.request_schema(api_keys.METADATA, 12)
    topic = build(nested(schema, "MetadataRequestTopic"), name=name, topic_id=uuid.UUID(int=0))
    return _request(
        api_keys.METADATA,
        12,
        topics=(topic,),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def test_legal_topic_names_are_kafkas() -> None:
    assert legal_topic_name("live-1a2b3c4d") and legal_topic_name("a.b_c-D9")
    assert legal_topic_name("x" * 249)
    for name in ("", ".", "..", "x" * 250, "live-x/", "a b", "é", "a\x00"):
        assert not legal_topic_name(name), name


def test_the_guard_keeps_topic_names_kafka_refuses_from_tansu(
    upstream_guard: UpstreamGuard,
) -> None:
    assert not upstream_guard.safe(DELETE_EMPTY_NAMED_TOPIC)
    assert not upstream_guard.safe(_create_topics("live-x/"))  # reset topic live-x on tansu
    assert not upstream_guard.safe(_metadata(""))  # tansu auto-creates what Metadata names
    assert upstream_guard.withheld == upstream_guard.withheld_names == 3
    assert upstream_guard.safe(_create_topics("live-x"))
    assert upstream_guard.safe(_metadata("live-x"))
    assert not upstream_guard.safe(_create_topics("live-x", MAX_UPSTREAM_PARTITIONS + 1))
    assert (upstream_guard.withheld, upstream_guard.withheld_names) == (4, 3)
    # What the gateway refuses anyway (it does not decode) reaches nothing: let through.
    assert upstream_guard.safe(DELETE_EMPTY_NAMED_TOPIC[:30])
