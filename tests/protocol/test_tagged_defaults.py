"""Responses the gateway builds or re-encodes leave out tagged fields holding their default,
as Kafka's generated serializer does (``if (currentLeader.equals(new LeaderIdAndEpoch()))``
skips the tag): librdkafka before 2.2.0 mis-skips tagged fields, so one written default can
break an old client's whole connection (issue 13).

The expected bytes are written by hand from Kafka's JSON schemas, and each case also shows the
same field with a non-default value *is* written, so a test could not pass by never writing
tags at all.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import sys
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.kio_nested import build, nested


def _create_topics_result(version: int, **extra: Any) -> Any:
    schema = api_table.response_schema(api_keys.CREATE_TOPICS, version)
    return build(
        nested(schema, "CreatableTopicResult"),
        name="orders",
        topic_id=uuid.UUID(int=0),
        error_code=KioErrorCode(89),
        error_message="throttled",
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
        **extra,
    )


def _compact_string(value: str) -> bytes:
    return bytes([len(value) + 1]) + value.encode()


def test_create_topics_result_without_a_config_error_writes_no_tag() -> None:
    # What the mutation stage answers for a refused topic (CreateTopics v5+).
    expected = (
        _compact_string("orders")
        + bytes(16)  # topic_id (v7)
        + struct.pack(">h", 89)
        + _compact_string("throttled")
        + struct.pack(">ih", -1, -1)
        + b"\x00"  # configs: null
        + b"\x00"  # no tagged fields: TopicConfigErrorCode 0 is the default
    )
    assert codec.encode_body(_create_topics_result(7)) == expected
    written = codec.encode_body(_create_topics_result(7, topic_config_error_code=40))
    assert written == expected[:-1] + b"\x01" + b"\x00\x02" + struct.pack(">h", 40)


def _produce_partition(**extra: Any) -> Any:
    schema = api_table.response_schema(api_keys.PRODUCE, 10)
    return build(
        nested(schema, "PartitionProduceResponse"),
        index=3,
        error_code=KioErrorCode(19),
        base_offset=-1,
        log_append_time=None,
        log_start_offset=-1,
        record_errors=(),
        error_message="refused",
        **extra,
    )


def test_refused_produce_partition_writes_no_current_leader() -> None:
    # The produce stage's refused partitions (any version a client sends, v10+ included).
    expected = (
        struct.pack(">ihqqq", 3, 19, -1, -1, -1)
        + b"\x01"  # record_errors: empty compact array
        + _compact_string("refused")
        + b"\x00"  # CurrentLeader (-1, -1) is the default: left out
    )
    assert codec.encode_body(_produce_partition()) == expected
    schema = api_table.response_schema(api_keys.PRODUCE, 10)
    leader = build(nested(schema, "LeaderIdAndEpoch"), leader_id=111, leader_epoch=4)
    written = codec.encode_body(_produce_partition(current_leader=leader))
    assert written == expected[:-1] + b"\x01\x00\x09" + struct.pack(">ii", 111, 4) + b"\x00"


@pytest.mark.parametrize("version", [12, 15, 16, 17])
def test_throttled_empty_fetch_writes_no_node_endpoints(version: int) -> None:
    # The fetch quota's empty response for a throttled fetch (spec §6.1).
    schema: Any = api_table.response_schema(api_keys.FETCH, version)
    empty = build(
        schema,
        throttle_time=datetime.timedelta(milliseconds=500),
        error_code=KioErrorCode(0),
        session_id=9,
        responses=(),
    )
    expected = struct.pack(">ihi", 500, 0, 9) + b"\x01" + b"\x00"
    assert codec.encode_body(empty) == expected
    if version >= 16:
        endpoint = build(nested(schema, "NodeEndpoint"), node_id=1, host="h", port=2, rack=None)
        written = codec.encode_body(dataclasses.replace(empty, node_endpoints=(endpoint,)))
        assert written.startswith(expected[:-1] + b"\x01\x00")  # one tag: 0, NodeEndpoints


def _tagged_fields() -> set[tuple[int, str, str]]:
    """(api key, entity class, field) of every tagged field in kio's response schemas."""
    found: set[tuple[int, str, str]] = set()
    for api_key in range(100):
        versions = api_table.modelled_versions(api_key)
        for version in versions or ():
            module = sys.modules[api_table.response_schema(api_key, version).__module__]
            for entity in vars(module).values():
                if isinstance(entity, type) and dataclasses.is_dataclass(entity):
                    for field in dataclasses.fields(entity):
                        if field.metadata.get("tag") is not None:
                            found.add((api_key, entity.__name__, field.name))
    return found


def test_every_tagged_response_field_the_gateway_may_write_is_covered_here() -> None:
    """A new kio (a new Kafka) with tagged fields in a response the gateway builds must get a
    case above; the KRaft quorum APIs are never built by the gateway."""
    covered = {
        (api_keys.PRODUCE, "PartitionProduceResponse", "current_leader"),
        (api_keys.PRODUCE, "ProduceResponse", "node_endpoints"),  # never advertised (v10+)
        (api_keys.FETCH, "FetchResponse", "node_endpoints"),
        # Partition data is never built: a throttled fetch is answered with no topics.
        (api_keys.FETCH, "PartitionData", "diverging_epoch"),
        (api_keys.FETCH, "PartitionData", "current_leader"),
        (api_keys.FETCH, "PartitionData", "snapshot_id"),
        (api_keys.CREATE_TOPICS, "CreatableTopicResult", "topic_config_error_code"),
        # Copied from the upstream by hand, defaults left out (api_versions_body.py).
        (api_keys.API_VERSIONS, "ApiVersionsResponse", "supported_features"),
        (api_keys.API_VERSIONS, "ApiVersionsResponse", "finalized_features_epoch"),
        (api_keys.API_VERSIONS, "ApiVersionsResponse", "finalized_features"),
        (api_keys.API_VERSIONS, "ApiVersionsResponse", "zk_migration_ready"),
    }
    quorum = {52, 53, 54, 59, 82}  # Vote, Begin/EndQuorumEpoch, FetchSnapshot, UpdateRaftVoter
    assert {t for t in _tagged_fields() if t[0] not in quorum} == covered
