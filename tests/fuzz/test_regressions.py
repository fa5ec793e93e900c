"""Cases the fuzz suite found, kept as plain tests."""

from __future__ import annotations

import struct

import pytest

from fuzz.cases import NULL_TOPICS_FRAME
from fuzz.worker import DecodeWorker
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.bounds import LengthError, check_body
from quotagate.protocol.headers import parse_request_header, response_body_offset

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
