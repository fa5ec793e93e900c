"""Per-API facts the gateway and its stages look up: names, the versions kio models,
header versions, where ``throttle_time_ms`` sits and when clients self-throttle (spec §6.3).

Everything derived from kio's generated schemas is computed lazily and cached: importing
every schema module would cost most of a second at start-up.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from functools import cache, lru_cache
from typing import Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType
from kio.static.protocol import Entity

from quotagate.protocol import api_keys


class ThrottleField(Enum):
    """Where a response version carries ``throttle_time_ms``."""

    ABSENT = "absent"
    FIRST = "first"  # the first body field: it can be spliced in place
    INSIDE = "inside"  # elsewhere in the body: needs a decode and re-encode
    LAST = "last"  # the last body field of a removed (non-flexible) version: spliced in place


# Spec §6.3: the Java client pauses a node on a throttled response only from these versions.
_SELF_THROTTLE_FROM: Final[dict[int, int]] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    37: 1,  # CreatePartitions
    38: 1,  # CreateDelegationToken
    39: 1,  # RenewDelegationToken
    40: 1,  # ExpireDelegationToken
    41: 1,  # DescribeDelegationToken
    42: 1,  # DeleteGroups
    43: 0,  # ElectLeaders
    44: 0,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    47: 0,  # OffsetDelete
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    62: 0,  # BrokerRegistration
    63: 0,  # BrokerHeartbeat
    64: 0,  # UnregisterBroker
    75: 0,  # DescribeTopicPartitions
}


# Versions Kafka 4.0 removed (KIP-896), which kio does not model. Every one of them predates
# flexible versions (KIP-482), so their headers are known: request header v1, response header
# v0. That is enough to read a request's acks, to answer one, or to pass it through.
_REMOVED_BELOW: Final[dict[int, int]] = {
    0: 3,  # Produce
    1: 4,  # Fetch
    2: 1,  # ListOffsets
    8: 2,  # OffsetCommit
    9: 1,  # OffsetFetch
    19: 2,  # CreateTopics
    20: 1,  # DeleteTopics
    23: 2,  # OffsetForLeaderEpoch
    27: 1,  # WriteTxnMarkers
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 1,  # DescribeConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    38: 1,  # CreateDelegationToken
    39: 1,  # RenewDelegationToken
    40: 1,  # ExpireDelegationToken
    41: 1,  # DescribeDelegationToken
}

# Where those removed versions carry throttle_time_ms (Kafka's JSON schemas of 3.x): first in
# the body for the admin APIs that had it from v0 and Fetch v1+, last for Produce v1-2 and the
# delegation-token APIs. The others have none (a throttle there only mutes).
_REMOVED_THROTTLE: Final[dict[int, tuple[int, ThrottleField]]] = {
    0: (1, ThrottleField.LAST),
    1: (1, ThrottleField.FIRST),
    29: (0, ThrottleField.FIRST),
    30: (0, ThrottleField.FIRST),
    31: (0, ThrottleField.FIRST),
    32: (0, ThrottleField.FIRST),
    34: (0, ThrottleField.FIRST),
    35: (0, ThrottleField.FIRST),
    38: (0, ThrottleField.LAST),
    39: (0, ThrottleField.LAST),
    40: (0, ThrottleField.LAST),
    41: (0, ThrottleField.LAST),
}


def removed_versions(api_key: int) -> range:
    """The versions of ``api_key`` Kafka 4.0 removed (empty when none)."""
    return range(_REMOVED_BELOW.get(api_key, 0))


def is_removed(api_key: int, api_version: int) -> bool:
    return 0 <= api_version < _REMOVED_BELOW.get(api_key, 0)


def api_name(api_key: int) -> str:
    """kio's snake_case name of an API (``"produce"``), or ``"unknown_<key>"``."""
    name = api_key_map.get(api_key)
    return name if name is not None else f"unknown_{api_key}"


def is_known_api(api_key: int) -> bool:
    return api_key in api_key_map


@cache
def modelled_versions(api_key: int) -> range | None:
    """The contiguous versions kio has schemas for (Kafka 4.2, minus what 4.0 removed)."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = sorted(
        version
        for version, types in schema_name_map[name].items()
        if EntityType.request in types and EntityType.response in types
    )
    if not versions:
        return None
    return range(versions[0], versions[-1] + 1)


# Asked per request (the header parser, stages that read a body) with whatever key and
# version a client sent: bounded, so garbage headers cannot grow the cache without end.
@lru_cache(maxsize=4096)
def is_modelled(api_key: int, api_version: int) -> bool:
    versions = modelled_versions(api_key)
    return versions is not None and api_version in versions


@cache
def request_schema(api_key: int, api_version: int) -> type[Entity]:
    schema: type[Entity] = load_request_schema(api_key, api_version)
    return schema


@cache
def response_schema(api_key: int, api_version: int) -> type[Entity]:
    schema: type[Entity] = load_response_schema(api_key, api_version)
    return schema


@lru_cache(maxsize=4096)  # per request, bounded as is_modelled
def request_header_version(api_key: int, api_version: int) -> int | None:
    """2 for flexible requests, 1 otherwise; None for versions neither kio models nor Kafka
    4.0 removed."""
    if not is_modelled(api_key, api_version):
        return 1 if is_removed(api_key, api_version) else None
    return 2 if request_schema(api_key, api_version).__flexible__ else 1


def response_header_version(api_key: int, api_version: int) -> int | None:
    """1 for flexible responses, 0 otherwise, and always 0 for ApiVersions.

    ApiVersions is the exception because a client that sent a version the broker does not
    know must still be able to read the response header.
    """
    if api_key == api_keys.API_VERSIONS:
        return 0
    if not is_modelled(api_key, api_version):
        return 0 if is_removed(api_key, api_version) else None
    return 1 if response_schema(api_key, api_version).__flexible__ else 0


@cache
def throttle_field(api_key: int, api_version: int) -> ThrottleField:
    if not is_modelled(api_key, api_version):
        since, where = _REMOVED_THROTTLE.get(api_key, (0, ThrottleField.ABSENT))
        if is_removed(api_key, api_version) and api_version >= since:
            return where
        return ThrottleField.ABSENT
    names = [f.name for f in dataclasses.fields(response_schema(api_key, api_version))]
    if "throttle_time" not in names:
        return ThrottleField.ABSENT
    return ThrottleField.FIRST if names[0] == "throttle_time" else ThrottleField.INSIDE


def has_throttle_time(api_key: int, api_version: int) -> bool:
    return throttle_field(api_key, api_version) is not ThrottleField.ABSENT


def client_self_throttles(api_key: int, api_version: int) -> bool:
    """Whether a Java client pauses itself on a throttled response of this version (§6.3)."""
    since = _SELF_THROTTLE_FROM.get(api_key)
    return since is not None and api_version >= since
