"""How a kind of request is charged, and which throttle it answers with: the rules, written once.

Kafka spreads these over each API's handler in ``KafkaApis``. This module classifies a kind of
request (:func:`classify`, from its header and flags alone); :mod:`quotagate.quota.decision`
applies the rules to one request, for the gateway's live traffic and the pipeline's replay of
usage events alike, so a rule cannot change on one side only.

The rules:

* **Request time** (KIP-124) is charged to the client's request quota, except for cluster
  actions (:data:`REQUEST_QUOTA_EXEMPT`), acks=0 produce requests (nobody waits for their
  answer) and follower fetches; their time goes to the shared exempt sensor. Upstream service
  time counts only where the upstream cannot park the request in purgatory
  (:data:`UPSTREAM_WAIT_NOT_CHARGED`; acks=all produce waits for replication).
* **One other quota** per API: Produce the request size on ``producer_byte_rate``; Fetch the
  response size on ``consumer_byte_rate`` (a follower fetch neither); CreateTopics,
  DeleteTopics and CreatePartitions their partition mutations on ``controller_mutation_rate``,
  strict (topic by topic, error 89) from :data:`STRICT_SINCE_VERSION` on, permissive before,
  and not at all for a ``validate_only`` request (the ZooKeeper-mode rule of KIP-599).
* **One throttle** per response (KIP-219): the largest, ties to the request quota
  (``choose_throttle``); a throttled fetch's bytes are taken back, since its data is not
  sent.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from quotagate.quota.controller_mutation import STRICT_SINCE_VERSION
from quotagate.quota.throttle_choice import Cause

# The API keys these rules name (Kafka's ApiKeys ids).
PRODUCE: Final = 0
FETCH: Final = 1
CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
CREATE_PARTITIONS: Final = 37
MUTATION_APIS: Final = frozenset(STRICT_SINCE_VERSION)
ACKS_ALL: Final = -1

# ApiKeys with clusterAction=true (spec §4): a broker answers a client's request for them
# with an error, and their time goes to the exempt sensor. UpdateFeatures (57) is the
# exception: admin tools send it for real and the broker throttles it (RequestQuotaTest).
REQUEST_QUOTA_EXEMPT: Final = frozenset(
    {4, 5, 6, 7, 27, 52, 53, 54, 55, 56, 58, 62, 63, 67, 83, 84, 85, 86, 87}
)

# API keys whose upstream time is never charged, with the reason it may wait upstream
# (docs/design.md "Definitions"; docs/quotas.md reproduces this table).
UPSTREAM_WAIT_NOT_CHARGED: Final[dict[int, str]] = {
    FETCH: "long poll up to fetch.max.wait.ms (DelayedFetch)",
    8: "OffsetCommit appends to __consumer_offsets with acks=all (DelayedProduce)",
    11: "JoinGroup waits for the rebalance (DelayedJoin)",
    14: "SyncGroup waits for the leader's assignment",
    CREATE_TOPICS: "waits for the controller up to the request timeout",
    DELETE_TOPICS: "waits for the controller up to the request timeout",
    21: "DeleteRecords waits for followers (DelayedDeleteRecords)",
    22: "InitProducerId appends to the transaction log with acks=all",
    24: "AddPartitionsToTxn appends to the transaction log with acks=all",
    25: "AddOffsetsToTxn appends to the transaction log with acks=all",
    26: "EndTxn writes markers and waits for them",
    28: "TxnOffsetCommit appends with acks=all",
    CREATE_PARTITIONS: "waits for the controller up to the request timeout",
    43: "ElectLeaders waits for the election (DelayedElectLeader)",
    45: "AlterPartitionReassignments waits for the controller",
    68: "ConsumerGroupHeartbeat appends to __consumer_offsets with acks=all",
    78: "ShareFetch long-polls like Fetch (DelayedShareFetch)",
    79: "ShareAcknowledge appends share-group state with acks=all",
}


class OtherQuota(enum.IntEnum):
    """The quota a request is charged to besides the request quota."""

    NONE = 0
    PRODUCE = 1
    FETCH = 2
    STRICT_MUTATION = 3
    PERMISSIVE_MUTATION = 4

    @property
    def cause(self) -> Cause:
        return _OTHER_CAUSE[self]


_OTHER_CAUSE: Final = {
    OtherQuota.NONE: Cause.NONE,
    OtherQuota.PRODUCE: Cause.PRODUCE,
    OtherQuota.FETCH: Cause.FETCH,
    OtherQuota.STRICT_MUTATION: Cause.CONTROLLER_MUTATION,
    OtherQuota.PERMISSIVE_MUTATION: Cause.CONTROLLER_MUTATION,
}


@dataclass(frozen=True, slots=True)
class Charging:
    """How a kind of request is charged; depends on nothing but its header and flags."""

    request_time: bool
    """Charged to the client's request quota (else to the exempt sensor)."""
    upstream_time: bool
    """The upstream's service time counts as request time (else only the gateway's own)."""
    other: OtherQuota


def classify(
    api_key: int,
    api_version: int,
    *,
    acks: int | None = None,
    follower: bool = False,
    validate_only: bool = False,
) -> Charging:
    """The charging of a request: ``acks`` for Produce, ``follower`` for Fetch,
    ``validate_only`` for the mutation APIs."""
    # Clients choose these numbers: only what decides the charging reaches the cache, so
    # sending many distinct acks or versions cannot grow it.
    kind_of_acks = (acks if acks in (0, ACKS_ALL) else 1) if api_key == PRODUCE else None
    strict = api_key in MUTATION_APIS and api_version >= STRICT_SINCE_VERSION[api_key]
    return _charging(api_key, kind_of_acks, strict, follower, validate_only)


@lru_cache(maxsize=1024)
def _charging(
    api_key: int, acks: int | None, strict: bool, follower: bool, validate_only: bool
) -> Charging:
    acks_zero = api_key == PRODUCE and acks == 0
    request_time = not (acks_zero or follower or api_key in REQUEST_QUOTA_EXEMPT)
    if api_key == PRODUCE:
        upstream_time = acks != ACKS_ALL
    else:
        upstream_time = api_key not in UPSTREAM_WAIT_NOT_CHARGED
    if api_key == PRODUCE:
        other = OtherQuota.PRODUCE
    elif api_key == FETCH:
        other = OtherQuota.NONE if follower else OtherQuota.FETCH
    elif api_key in MUTATION_APIS and not validate_only:
        other = OtherQuota.STRICT_MUTATION if strict else OtherQuota.PERMISSIVE_MUTATION
    else:
        other = OtherQuota.NONE
    return Charging(request_time, upstream_time, other)
