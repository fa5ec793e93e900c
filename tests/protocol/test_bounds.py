"""The bounds walk: no declared length reaches kio's native reader unless the frame backs it."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import pytest
from kio.schema.create_topics.v5.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.metadata.v4.request import MetadataRequest
from kio.static.primitive import i16, i32

from quotagate.protocol import codec
from quotagate.protocol.bounds import LengthError, check_body
from quotagate.protocol.headers import parse_request_header

# The frame: CreateTopics v5 whose topics array claims 2^34 - 1 entries.
HOSTILE_CREATE_TOPICS = bytes.fromhex("00000013001300050000000100046576696c008080808040")


def test_the_hostile_frame_is_a_codec_error() -> None:
    header = parse_request_header(HOSTILE_CREATE_TOPICS)
    with pytest.raises(codec.CodecError, match=r"topics: 17179869183 entries claimed"):
        codec.decode_request(HOSTILE_CREATE_TOPICS, header)


def test_decoding_the_hostile_frame_cannot_abort_the_process() -> None:
    # In a child with a 1 GiB address-space cap, so that a regression shows as an abort of the
    # child (kio asking for 137 GB) instead of taking the test run down with it.
    script = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from quotagate.protocol import codec
        from quotagate.protocol.headers import parse_request_header
        frame = bytes.fromhex({HOSTILE_CREATE_TOPICS.hex()!r})
        try:
            codec.decode_request(frame, parse_request_header(frame))
        except codec.CodecError as exc:
            print("refused:", exc)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: cannot decode CreateTopicsRequest")


def _create_topics_body() -> bytes:
    request = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name="orders",
                num_partitions=i32(3),
                replication_factor=i16(1),
                assignments=(),
                configs=(CreatableTopicConfig(name="cleanup.policy", value="compact"),),
            ),
        )
    )
    return codec.encode_body(request)


def test_a_valid_body_walks_to_its_end() -> None:
    body = _create_topics_body()
    assert check_body(CreateTopicsRequest, body, 0) == len(body)


@pytest.mark.parametrize(
    ("offset", "lie", "message"),
    [
        (0, b"\xff\xff\xff\xff\x0f", "CreateTopicsRequest.topics"),  # topics count
        (1, b"\x7f", "CreatableTopic.name"),  # topic name length
        (14, b"\xff\xff\x7f", "CreatableTopic.assignments"),  # assignments count
        (15, b"\x40", "CreatableTopic.configs"),  # 63 configs in 31 bytes
        (16, b"\x30", "CreatableTopicConfig.name"),  # config name length
    ],
)
def test_every_length_lie_is_named(offset: int, lie: bytes, message: str) -> None:
    body = _create_topics_body()
    hostile = body[:offset] + lie + body[offset + 1 :]
    with pytest.raises(LengthError, match=message):
        check_body(CreateTopicsRequest, hostile, 0)


def test_a_truncated_body_is_refused() -> None:
    body = _create_topics_body()
    for end in range(len(body)):
        with pytest.raises(LengthError):
            check_body(CreateTopicsRequest, body[:end], 0)


def test_legacy_negative_counts_other_than_null_are_refused() -> None:
    with pytest.raises(LengthError, match="invalid length -2"):
        check_body(MetadataRequest, struct.pack(">i", -2) + b"\x00", 0)
