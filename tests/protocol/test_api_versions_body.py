"""ApiVersions responses rewritten as Kafka's serializer writes them: tagged fields holding
their default value are left out (librdkafka before 2.2.0 cannot skip them)."""

from __future__ import annotations

import struct

from quotagate.protocol import api_keys, codec
from quotagate.protocol.api_support import VersionRange
from quotagate.protocol.api_versions_body import parse_api_versions
from quotagate.protocol.framing import with_size_prefix

ENTRY = struct.pack(">hhh", api_keys.METADATA, 0, 12) + b"\x00"


def _v3_frame(tags: bytes, count: int) -> bytes:
    body = b"\x00\x00" + b"\x02" + ENTRY + struct.pack(">i", 0) + bytes([count]) + tags
    return with_size_prefix(struct.pack(">i", 9) + body)  # ApiVersions answers with header v0


DEFAULT_TAGS = (
    b"\x00\x01\x01"  # SupportedFeatures: empty
    + b"\x01\x08"
    + b"\xff" * 8  # FinalizedFeaturesEpoch: -1
    + b"\x02\x01\x01"  # FinalizedFeatures: empty
    + b"\x03\x01\x00"  # ZkMigrationReady: false
)


def test_tagged_fields_holding_defaults_are_left_out() -> None:
    body = parse_api_versions(_v3_frame(DEFAULT_TAGS, 4), 3)
    rewritten = body.with_ranges([VersionRange(api_keys.METADATA, 0, 12)])
    assert rewritten.endswith(struct.pack(">i", 0) + b"\x00")  # throttle time, no tags
    decoded = codec.decode_response(rewritten, api_keys.API_VERSIONS, 3)
    assert int(decoded.finalized_features_epoch) == -1
    assert [int(k.api_key) for k in decoded.api_keys] == [api_keys.METADATA]


def test_tagged_fields_with_values_are_kept_byte_for_byte() -> None:
    epoch = b"\x01\x08" + struct.pack(">q", 7)
    unknown = b"\x09\x02ab"  # a tag kio does not know: kept, never interpreted
    body = parse_api_versions(_v3_frame(epoch + b"\x03\x01\x00" + unknown, 3), 3)
    rewritten = body.with_ranges(body.ranges)
    assert rewritten.endswith(struct.pack(">i", 0) + b"\x02" + epoch + unknown)


def _feature(name: str, first: int, second: int) -> bytes:
    encoded = name.encode()
    return bytes([len(encoded) + 1]) + encoded + struct.pack(">hh", first, second) + b"\x00"


def _tag(tag: int, value: bytes) -> bytes:
    return bytes([tag, len(value)]) + value


def test_transaction_version_2_is_advertised_as_1_while_produce_is_capped_below_v12() -> None:
    """KIP-890: a client that sees transaction.version 2 sends transactional Produce without
    AddPartitionsToTxn, which Kafka accepts only from Produce v12; the gateway's Produce stops
    at v9, so it lowers the level (Kafka Streams with exactly_once_v2 failed without this).
    Other features pass as they are."""
    supported = (
        b"\x03" + _feature("transaction.version", 0, 2) + _feature("metadata.version", 7, 27)
    )
    finalized = (
        b"\x03" + _feature("transaction.version", 2, 2) + _feature("metadata.version", 27, 27)
    )
    epoch = _tag(1, struct.pack(">q", 42))
    frame = _v3_frame(_tag(0, supported) + epoch + _tag(2, finalized), 3)
    rewritten = parse_api_versions(frame, 3).with_ranges([VersionRange(api_keys.METADATA, 0, 12)])
    decoded = codec.decode_response(rewritten, api_keys.API_VERSIONS, 3)
    assert {
        str(f.name): (int(f.min_version), int(f.max_version)) for f in decoded.supported_features
    } == {
        "transaction.version": (0, 1),
        "metadata.version": (7, 27),
    }
    assert {
        str(f.name): (int(f.max_version_level), int(f.min_version_level))
        for f in decoded.finalized_features
    } == {"transaction.version": (1, 1), "metadata.version": (27, 27)}
    assert int(decoded.finalized_features_epoch) == 42
