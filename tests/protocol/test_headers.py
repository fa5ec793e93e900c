from __future__ import annotations

import struct
from datetime import timedelta

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.response import MetadataResponse

from quotagate.protocol import api_table, codec
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.headers import (
    HeaderError,
    encode_response_header,
    parse_request_header,
    response_body_offset,
    response_correlation_id,
)
from quotagate.protocol.produce import produce_acks


def test_header_v1_of_a_non_flexible_request() -> None:
    frame = codec.encode_request_frame(
        MetadataV4(topics=None, allow_auto_topic_creation=False), 42, "client-1"
    )
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 4, 42)
    assert header.client_id == "client-1"
    assert header.body_offset == 4 + 10 + len("client-1")
    assert codec.decode_request(frame, header) == MetadataV4(
        topics=None, allow_auto_topic_creation=False
    )


def test_header_v2_of_a_flexible_request_skips_tagged_fields() -> None:
    body = MetadataV12(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    frame = codec.encode_request_frame(body, 7, None)
    header = parse_request_header(frame)
    assert header.client_id is None
    assert header.body_offset == 4 + 10 + 1  # one byte: zero tagged fields
    assert codec.decode_request(frame, header) == body


def test_unmodelled_versions_still_yield_correlation_and_client_id() -> None:
    payload = struct.pack(">hhih", 3, 99, 5, 2) + b"id" + b"opaque body"
    header = parse_request_header(with_size_prefix(payload))
    assert (header.api_version, header.correlation_id, header.client_id) == (99, 5, "id")
    assert header.body_offset == -1


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">hhi", 3, 4, 1),  # no room for the client id length
        struct.pack(">hhih", 3, 4, 1, 50) + b"short",  # client id longer than the frame
        struct.pack(">hhih", 3, 4, 1, -7),  # nonsense length
        struct.pack(">hhih", 3, 12, 1, 0) + b"\x01\x00\x7f",  # tagged field past the end
        struct.pack(">hhih", 3, 4, 1, 2) + b"\xff\xfe",  # client id not UTF-8
    ],
)
def test_headers_that_lie_are_refused(payload: bytes) -> None:
    with pytest.raises(HeaderError):
        parse_request_header(with_size_prefix(payload))


def test_api_versions_responses_always_use_header_v0() -> None:
    # ApiVersions v3 is flexible, yet its response header carries no tagged fields.
    assert api_table.request_header_version(18, 3) == 2
    assert api_table.response_header_version(18, 3) == 0
    assert encode_response_header(9, 18, 3) == struct.pack(">i", 9)
    assert encode_response_header(9, 3, 12) == struct.pack(">i", 9) + b"\x00"
    request = codec.encode_request_frame(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 1, "c"
    )
    assert parse_request_header(request).body_offset == 4 + 10 + 1 + 1


def test_response_header_v1_offsets() -> None:
    frame = codec.encode_response_frame(
        MetadataResponse(throttle_time=timedelta(0), brokers=(), topics=()), 77
    )
    assert response_correlation_id(frame) == 77
    assert response_body_offset(frame, 3, 12) == 9


@pytest.mark.parametrize(
    ("version", "transactional_id", "acks"),
    [(3, None, 0), (3, "tx", -1), (8, "transactional", 1), (9, None, 0), (9, "tx-9", -1)],
)
def test_produce_acks_is_read_without_decoding_records(
    version: int, transactional_id: str | None, acks: int
) -> None:
    schema = api_table.request_schema(0, version)
    body = schema(  # type: ignore[call-arg]
        transactional_id=transactional_id, acks=acks, timeout=timedelta(seconds=1), topic_data=()
    )
    frame = codec.encode_request_frame(body, 1, "p")
    assert produce_acks(frame, parse_request_header(frame)) == acks
