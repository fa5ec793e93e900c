"""API names as broker request logs print them, for the ingest parsers.

Which API is charged to which quota is not here: that is the engine's
(``quotagate.quota.request_rules``), shared with the gateway.
"""

from __future__ import annotations

from typing import Final

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
