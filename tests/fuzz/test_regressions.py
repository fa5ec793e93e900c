"""Cases the fuzz suite found, kept as plain tests."""

from __future__ import annotations

import struct

import pytest

from fuzz.cases import NULL_TOPICS_FRAME
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.headers import parse_request_header


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
