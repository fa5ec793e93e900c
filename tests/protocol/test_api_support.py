from __future__ import annotations

import struct
from datetime import timedelta

from kio.schema.api_versions.v3 import response as v3
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.response import ProduceResponse
from kio.static.primitive import i16

from quotagate.protocol import api_table, codec
from quotagate.protocol.api_support import VersionRange, gateway_range, negotiate
from quotagate.protocol.api_versions_body import parse_api_versions
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.throttle_time import get_throttle_time_ms, set_throttle_time_ms


def test_negotiation_intersects_caps_and_passes_unmodelled_keys() -> None:
    upstream = [
        # produce: capped at v9 (v10+ carries node endpoints); v0-2, which Kafka 4.0
        # dropped, are metered by hand
        VersionRange(0, 0, 11),
        # fetch: capped at v15; v0-2 are refused under a fetch quota, so never offered
        VersionRange(1, 0, 17),
        VersionRange(3, 0, 12),  # metadata: kio models from v0
        VersionRange(2, 0, 9),  # list offsets: v0 (dropped by Kafka 4.0) is forwarded raw
        VersionRange(78, 1, 2),  # share fetch: never advertised
        VersionRange(1000, 0, 3),  # unknown to kio: forwarded raw with the upstream's range
    ]
    local = {17: range(0, 2), 48: range(0, 2)}
    assert negotiate(upstream, local) == [
        VersionRange(0, 0, 9),
        VersionRange(1, 3, 15),
        VersionRange(2, 0, 9),
        VersionRange(3, 0, 12),
        VersionRange(17, 0, 1),
        VersionRange(48, 0, 1),
        VersionRange(1000, 0, 3),
    ]
    assert gateway_range(78) == range(0)


def test_api_versions_body_rewrite_keeps_the_tail_byte_for_byte() -> None:
    response = v3.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            v3.ApiVersion(api_key=i16(k), min_version=i16(0), max_version=i16(m))
            for k, m in ((0, 11), (3, 12), (18, 4))
        ),
        throttle_time=timedelta(milliseconds=5),
        finalized_features_epoch=7,
    )
    frame = codec.encode_response_frame(response, 3)
    body = parse_api_versions(frame, 3)
    assert body.ranges == [VersionRange(0, 0, 11), VersionRange(3, 0, 12), VersionRange(18, 0, 4)]
    rewritten = body.with_ranges([VersionRange(0, 3, 9), VersionRange(18, 0, 4)])
    assert rewritten.endswith(frame[body.array_end :])
    decoded = codec.decode_response(rewritten, 18, 3)
    assert [(a.api_key, a.min_version, a.max_version) for a in decoded.api_keys] == [
        (0, 3, 9),
        (18, 0, 4),
    ]
    assert decoded.throttle_time == timedelta(milliseconds=5)
    assert decoded.finalized_features_epoch == 7


def test_unsupported_version_answers_are_read_as_v0() -> None:
    payload = struct.pack(">ihi", 9, 35, 1) + struct.pack(">hhh", 18, 0, 3)
    body = parse_api_versions(with_size_prefix(payload), 4)
    assert body.error_code == 35
    assert body.ranges == [VersionRange(18, 0, 3)]


def test_throttle_time_is_spliced_in_place_when_first() -> None:
    assert api_table.throttle_field(3, 12) is api_table.ThrottleField.FIRST
    frame = codec.encode_response_frame(
        MetadataResponse(throttle_time=timedelta(0), brokers=(), topics=()), 1
    )
    throttled = set_throttle_time_ms(frame, 3, 12, 1234)
    assert len(throttled) == len(frame)
    assert get_throttle_time_ms(throttled, 3, 12) == 1234


def test_throttle_time_elsewhere_in_the_body_is_re_encoded() -> None:
    assert api_table.throttle_field(0, 9) is api_table.ThrottleField.INSIDE
    frame = codec.encode_response_frame(
        ProduceResponse(responses=(), throttle_time=timedelta(0)), 1
    )
    for throttle_ms in (250, 1001, 2_147_483_647):
        throttled = set_throttle_time_ms(frame, 0, 9, throttle_ms)
        assert get_throttle_time_ms(throttled, 0, 9) == throttle_ms


def test_api_table_facts_from_the_spec() -> None:
    assert api_table.client_self_throttles(0, 6) and not api_table.client_self_throttles(0, 5)
    assert api_table.client_self_throttles(1, 8) and not api_table.client_self_throttles(1, 7)
    assert not api_table.client_self_throttles(48, 1)  # DescribeClientQuotas: never
    assert api_table.has_throttle_time(48, 0)
    assert not api_table.has_throttle_time(17, 1)  # SaslHandshake has none
