"""The metered APIs' versions Kafka 4.0 removed, read and answered by hand.

The frames are written field by field from Kafka's JSON schemas (the 3.x ones, which still
had these versions), independently of the code under test.
"""

from __future__ import annotations

import struct

import pytest

from quotagate.protocol import api_keys, api_table, removed_versions
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.headers import HeaderError, parse_request_header, response_body_offset
from quotagate.protocol.produce import produce_acks
from quotagate.protocol.produce_topics import produce_topic_bytes
from quotagate.protocol.throttle_time import get_throttle_time_ms, set_throttle_time_ms
from support import old_frames


def _s(value: str) -> bytes:
    return old_frames.string(value)


def _request(api_key: int, version: int, body: bytes) -> bytes:
    return old_frames.request(api_key, version, body)


def _produce(version: int, topics: list[tuple[str, list[tuple[int, int]]]], acks: int = 1) -> bytes:
    return old_frames.produce(version, old_frames.filler(topics), acks=acks)


def test_removed_versions_have_known_headers_and_no_schema() -> None:
    for api_key, version in ((0, 2), (1, 3), (19, 1), (20, 0), (2, 0), (8, 1)):
        assert api_table.is_removed(api_key, version)
        assert not api_table.is_modelled(api_key, version)
        assert api_table.request_header_version(api_key, version) == 1
        assert api_table.response_header_version(api_key, version) == 0
    assert not api_table.is_removed(0, 3)  # modelled
    assert api_table.request_header_version(19, 8) is None  # newer than Kafka 4.2


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_topics_bytes_and_acks(version: int) -> None:
    frame = _produce(version, [("alpha", [(0, 10), (1, 20)]), ("beta", [(0, 5)])], acks=-1)
    header = parse_request_header(frame)
    assert header.body_offset == 4 + 2 + 2 + 4 + 2 + 3
    assert produce_acks(frame, header) == -1
    assert produce_topic_bytes(frame, header) == [("alpha", 30), ("beta", 5)]
    request = removed_versions.read_produce(frame, header)
    assert [(t.name, t.partitions, t.record_bytes) for t in request.topics] == [
        ("alpha", (0, 1), 30),
        ("beta", (0,), 5),
    ]


def test_a_produce_without_a_topic_keeps_the_other_topics_bytes() -> None:
    frame = _produce(2, [("alpha", [(0, 10)]), ("beta", [(3, 5)]), ("gamma", [(0, 1)])])
    request = removed_versions.read_produce(frame, parse_request_header(frame))
    cut = removed_versions.produce_without(frame, request, {"beta"})
    assert cut == _produce(2, [("alpha", [(0, 10)]), ("gamma", [(0, 1)])])


def _produce_response(version: int, entries: list[tuple[str, int, int, int]]) -> bytes:
    return old_frames.produce_response(version, entries, throttle_ms=250)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_refused_topics_are_appended_to_the_upstream_produce_response(version: int) -> None:
    frame = _produce(version, [("alpha", [(0, 10)]), ("beta", [(3, 5)])])
    request = removed_versions.read_produce(frame, parse_request_header(frame))
    upstream = _produce_response(version, [("alpha", 0, 0, 42)])
    merged = removed_versions.produce_response_with(upstream, version, [request.topics[1]], 19)
    assert merged == _produce_response(version, [("alpha", 0, 0, 42), ("beta", 3, 19, -1)])
    whole = removed_versions.produce_refused_response(7, version, list(request.topics), 19)
    expected = _produce_response(version, [("alpha", 0, 19, -1), ("beta", 3, 19, -1)])
    if version >= 1:  # the gateway's own answer starts unthrottled
        expected = expected[:-4] + struct.pack(">i", 0)
    assert whole == expected


def test_produce_v1_v2_throttle_time_is_the_last_field() -> None:
    frame = _produce_response(2, [("alpha", 0, 0, 42)])
    assert get_throttle_time_ms(frame, api_keys.PRODUCE, 2) == 250
    spliced = set_throttle_time_ms(frame, api_keys.PRODUCE, 2, 1234)
    assert spliced == frame[:-4] + struct.pack(">i", 1234)
    assert not api_table.has_throttle_time(api_keys.PRODUCE, 0)
    assert api_table.has_throttle_time(api_keys.FETCH, 1)
    with pytest.raises(HeaderError):
        set_throttle_time_ms(frame[:8], api_keys.PRODUCE, 2, 1)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_is_answered_in_its_own_shape(version: int) -> None:
    body = struct.pack(">iii", -1, 500, 1)
    if version >= 3:
        body += struct.pack(">i", 1 << 20)
    body += struct.pack(">i", 1) + _s("alpha") + struct.pack(">i", 2)
    body += struct.pack(">iqi", 0, 5, 1000) + struct.pack(">iqi", 4, 0, 1000)
    frame = _request(api_keys.FETCH, version, body)
    header = parse_request_header(frame)
    request = removed_versions.read_fetch(frame, header)
    assert request.replica_id == -1 and request.min_bytes == 1
    assert request.max_bytes == (1 << 20 if version == 3 else -1)
    assert request.topics == (("alpha", (0, 4)),)
    if version == 3:
        capped = removed_versions.fetch_capped(frame, header, 5000, 1)
        assert removed_versions.read_fetch(capped, header).max_bytes == 5000
        assert capped == frame.replace(struct.pack(">i", 1 << 20), struct.pack(">i", 5000), 1)
        empty = removed_versions.fetch_empty_response(7, version, 321)
        assert empty == with_size_prefix(struct.pack(">iii", 7, 321, 0))
    answer = removed_versions.fetch_error_response(7, version, request, 35)
    expected = struct.pack(">i", 7)
    if version >= 1:
        expected += struct.pack(">i", 0)
    expected += struct.pack(">i", 1) + _s("alpha") + struct.pack(">i", 2)
    for partition in (0, 4):
        expected += struct.pack(">ihqi", partition, 35, -1, 0)
    assert answer == with_size_prefix(expected)
    assert response_body_offset(answer, api_keys.FETCH, version) == 8


def test_create_topics_v0_v1_and_delete_topics_v0_are_read() -> None:
    topic = _s("alpha") + struct.pack(">ih", -1, -1)
    topic += struct.pack(">i", 2) + struct.pack(">ii", 0, 1) + struct.pack(">i", 111)
    topic += struct.pack(">ii", 1, 1) + struct.pack(">i", 111)
    topic += struct.pack(">i", 1) + _s("cleanup.policy") + struct.pack(">h", -1)
    plain = _s("beta") + struct.pack(">ih", 3, 1) + struct.pack(">ii", 0, 0)
    topics = struct.pack(">i", 2) + topic + plain + struct.pack(">i", 30_000)
    v0 = _request(api_keys.CREATE_TOPICS, 0, topics)
    v1 = _request(api_keys.CREATE_TOPICS, 1, topics + b"\x01")
    read_v0 = removed_versions.read_mutation(v0, parse_request_header(v0))
    assert read_v0 == removed_versions.MutationRequest(
        (
            removed_versions.CreatableTopic("alpha", -1, (0, 1)),
            removed_versions.CreatableTopic("beta", 3, ()),
        ),
        False,
    )
    assert removed_versions.read_mutation(v1, parse_request_header(v1)).validate_only
    delete = _request(
        api_keys.DELETE_TOPICS, 0, struct.pack(">i", 2) + _s("a") + _s("b") + b"\0\0\0\1"
    )
    assert removed_versions.read_mutation(delete, parse_request_header(delete)).topics == (
        "a",
        "b",
    )
    results = struct.pack(">i", 1) + _s("alpha") + struct.pack(">h", 36)
    response = with_size_prefix(struct.pack(">i", 7) + results + struct.pack(">h", -1))
    assert removed_versions.read_mutation_results(response, api_keys.CREATE_TOPICS, 1) == [
        removed_versions.TopicResult("alpha", 36)
    ]


def test_a_count_the_frame_cannot_back_is_refused_before_looping() -> None:
    frame = _request(api_keys.DELETE_TOPICS, 0, struct.pack(">i", 2_000_000_000) + b"\0" * 8)
    with pytest.raises(HeaderError, match="2000000000 entries"):
        removed_versions.read_mutation(frame, parse_request_header(frame))
    truncated = _produce(1, [("alpha", [(0, 10)])])[:-3]
    with pytest.raises(HeaderError):
        removed_versions.read_produce(truncated, parse_request_header(truncated))
