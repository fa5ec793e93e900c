"""The few Kafka API facts the pipeline needs (spec §4, §5.2, §6.1).

The pipeline may only depend on ``quota`` and ``usage`` (DESIGN.md), so it keeps its own
small table instead of importing the gateway's protocol layer.
"""

from __future__ import annotations

from typing import Final

PRODUCE: Final = 0
FETCH: Final = 1
CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
CREATE_PARTITIONS: Final = 37

# KIP-599: a controller-mutation request is strict from these versions on (spec §5.2).
STRICT_MUTATION_SINCE: Final[dict[int, int]] = {
    CREATE_TOPICS: 6,
    DELETE_TOPICS: 5,
    CREATE_PARTITIONS: 3,
}

# ApiKeys with clusterAction=true, whose time goes to the exempt sensor, never to a
# client's request quota (spec §4); except UpdateFeatures (57), which a broker throttles
# like any admin request (RequestQuotaTest). The gateway's protocol.request_time has the
# same set.
REQUEST_QUOTA_EXEMPT: Final = frozenset(
    {4, 5, 6, 7, 27, 52, 53, 54, 55, 56, 58, 62, 63, 67, 83, 84, 85, 86, 87}
)

# ApiKeys enum names as the pre-2.8 text request log prints them.
API_NAMES: Final[dict[str, int]] = {
    name: key
    for key, name in enumerate(
        [
            "PRODUCE",
            "FETCH",
            "LIST_OFFSETS",
            "METADATA",
            "LEADER_AND_ISR",
            "STOP_REPLICA",
            "UPDATE_METADATA",
            "CONTROLLED_SHUTDOWN",
            "OFFSET_COMMIT",
            "OFFSET_FETCH",
            "FIND_COORDINATOR",
            "JOIN_GROUP",
            "HEARTBEAT",
            "LEAVE_GROUP",
            "SYNC_GROUP",
            "DESCRIBE_GROUPS",
            "LIST_GROUPS",
            "SASL_HANDSHAKE",
            "API_VERSIONS",
            "CREATE_TOPICS",
            "DELETE_TOPICS",
            "DELETE_RECORDS",
            "INIT_PRODUCER_ID",
            "OFFSET_FOR_LEADER_EPOCH",
            "ADD_PARTITIONS_TO_TXN",
            "ADD_OFFSETS_TO_TXN",
            "END_TXN",
            "WRITE_TXN_MARKERS",
            "TXN_OFFSET_COMMIT",
            "DESCRIBE_ACLS",
            "CREATE_ACLS",
            "DELETE_ACLS",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "ALTER_REPLICA_LOG_DIRS",
            "DESCRIBE_LOG_DIRS",
            "SASL_AUTHENTICATE",
            "CREATE_PARTITIONS",
            "CREATE_DELEGATION_TOKEN",
            "RENEW_DELEGATION_TOKEN",
            "EXPIRE_DELEGATION_TOKEN",
            "DESCRIBE_DELEGATION_TOKEN",
            "DELETE_GROUPS",
            "ELECT_LEADERS",
            "INCREMENTAL_ALTER_CONFIGS",
            "ALTER_PARTITION_REASSIGNMENTS",
            "LIST_PARTITION_REASSIGNMENTS",
            "OFFSET_DELETE",
            "DESCRIBE_CLIENT_QUOTAS",
            "ALTER_CLIENT_QUOTAS",
            "DESCRIBE_USER_SCRAM_CREDENTIALS",
            "ALTER_USER_SCRAM_CREDENTIALS",
            "VOTE",
            "BEGIN_QUORUM_EPOCH",
            "END_QUORUM_EPOCH",
            "DESCRIBE_QUORUM",
            "ALTER_PARTITION",
            "UPDATE_FEATURES",
            "ENVELOPE",
            "FETCH_SNAPSHOT",
            "DESCRIBE_CLUSTER",
            "DESCRIBE_PRODUCERS",
        ]
    )
} | {"ALTER_ISR": 56, "ELECT_PREFERRED_LEADERS": 43}  # names older releases used


def is_mutation(api_key: int) -> bool:
    return api_key in STRICT_MUTATION_SINCE


def is_strict_mutation(api_key: int, api_version: int) -> bool:
    since = STRICT_MUTATION_SINCE.get(api_key)
    return since is not None and api_version >= since
