"""Which part of a request's time the request-time quota (KIP-124) charges.

A broker charges the I/O- and network-thread time a request costs, never the time it waits
in purgatory. The gateway's equivalent (DESIGN.md "Request time"): it always charges its own
time on the request, and adds the upstream's service time only for APIs that cannot park in
broker purgatory. For the APIs below the upstream may hold the request for a long time on
purpose (long-poll fetches, acks=all produce, group rebalances, appends to internal topics
that wait for replication, controller work with a timeout), so that wait is not charged.

This table is the one place the rule lives; ``docs/quotas.md`` reproduces it.
"""

from __future__ import annotations

from typing import Final

from quotagate.protocol import api_keys

# API keys whose upstream time is never charged, with the reason it may wait upstream.
UPSTREAM_WAIT_NOT_CHARGED: Final[dict[int, str]] = {
    api_keys.FETCH: "long poll up to fetch.max.wait.ms (DelayedFetch)",
    8: "OffsetCommit appends to __consumer_offsets with acks=all (DelayedProduce)",
    api_keys.JOIN_GROUP: "waits for the rebalance (DelayedJoin)",
    api_keys.SYNC_GROUP: "waits for the leader's assignment",
    api_keys.CREATE_TOPICS: "waits for the controller up to the request timeout",
    api_keys.DELETE_TOPICS: "waits for the controller up to the request timeout",
    21: "DeleteRecords waits for followers (DelayedDeleteRecords)",
    22: "InitProducerId appends to the transaction log with acks=all",
    24: "AddPartitionsToTxn appends to the transaction log with acks=all",
    25: "AddOffsetsToTxn appends to the transaction log with acks=all",
    26: "EndTxn writes markers and waits for them",
    28: "TxnOffsetCommit appends with acks=all",
    api_keys.CREATE_PARTITIONS: "waits for the controller up to the request timeout",
    43: "ElectLeaders waits for the election (DelayedElectLeader)",
    45: "AlterPartitionReassignments waits for the controller",
    68: "ConsumerGroupHeartbeat appends to __consumer_offsets with acks=all",
    api_keys.SHARE_FETCH: "long poll like Fetch (DelayedShareFetch)",
    api_keys.SHARE_ACKNOWLEDGE: "appends share-group state with acks=all",
}

# ApiKeys with clusterAction=true (spec §4): a broker answers a client's request for them
# with an error, whose time goes to the exempt sensor. UpdateFeatures (57) is the exception:
# admin tools send it for real and the broker throttles it (RequestQuotaTest).
REQUEST_QUOTA_EXEMPT: Final = frozenset(
    {4, 5, 6, 7, 27, 52, 53, 54, 55, 56, 58, 62, 63, 67, 83, 84, 85, 86, 87}
)

ACKS_ALL: Final = -1


def charges_upstream_time(api_key: int, acks: int | None = None) -> bool:
    """Whether the upstream's service time of this request counts as request time.

    ``acks`` matters only for Produce: acks=all may wait for replication in purgatory,
    acks=1 is answered as soon as the leader appended (acks=0 is exempt altogether).
    """
    if api_key == api_keys.PRODUCE:
        return acks != ACKS_ALL
    return api_key not in UPSTREAM_WAIT_NOT_CHARGED


def is_exempt(api_key: int) -> bool:
    """Cluster actions never count against a client's request quota."""
    return api_key in REQUEST_QUOTA_EXEMPT
