"""The quotas a fleet holds together, seen the way the fleet ledger needs them.

Byte rates (produce, fetch), controller mutations and per-topic bytes-in thresholds, at
the client and at the tenant level, are shared by every worker of a fleet; request-time
quotas are not (a share of one process's time, as Kafka's is a share of one broker's
threads). Each shared quota answers three
questions: what has this process recorded per key so far, record what a peer used, and
what is the key's quota per second (for the fallback when a peer falls silent).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Protocol

from quotagate.quota.client_quota_manager import ClientQuotaManager
from quotagate.quota.fleet_report import Key
from quotagate.quota.java import UNBOUNDED
from quotagate.quota.managers import QuotaManagers
from quotagate.quota.throttle_choice import Cause
from quotagate.quota.topic_bytes_in import TopicBytesInQuota

# The kinds a fleet shares are the quota kinds a throttle is caused by, spelled as Cause spells
# them (they travel in the fleet's reports as these strings).
PRODUCE: Final = Cause.PRODUCE.value
FETCH: Final = Cause.FETCH.value
CONTROLLER_MUTATION: Final = Cause.CONTROLLER_MUTATION.value
TOPIC_BYTES_IN: Final = Cause.TOPIC_BYTES_IN.value
TENANT_PRODUCE: Final = Cause.TENANT_PRODUCE.value
TENANT_FETCH: Final = Cause.TENANT_FETCH.value
TENANT_CONTROLLER_MUTATION: Final = Cause.TENANT_CONTROLLER_MUTATION.value
"""The tenant level's quotas (issue 25): keys ``(tenant, "")``. A worker of an earlier
release ignores these kinds (unknown kinds are skipped), and holds only the client level."""


class SharedQuota(Protocol):
    kind: str
    key_arity: int

    def local_totals(self) -> Iterator[tuple[Key, object, float]]:
        """``(key, counter, total)``: this process's cumulative usage per key. ``counter``
        is the object holding the total; a different object means the count restarted."""
        ...

    def record_remote(self, key: Key, amount: float, now_ms: int) -> None: ...

    def limit(self, key: Key) -> float | None:
        """The key's quota per second, None when it has none."""
        ...

    def scale_throttles(self, scales: dict[Key, float]) -> None:
        """Multiply the throttles of these keys (the others: none) while part of their
        fleet usage is a fair share assumed for silent peers."""
        ...


class ClientQuotaShare:
    """A byte-rate or controller-mutation quota: keys are sharing keys (user, client id)."""

    key_arity = 2

    def __init__(self, kind: str, manager: ClientQuotaManager) -> None:
        self.kind = kind
        self._manager = manager

    def local_totals(self) -> Iterator[tuple[Key, object, float]]:
        for key, sensor in self._manager.quota_sensors().items():
            yield key, sensor, sensor.recorded

    def record_remote(self, key: Key, amount: float, now_ms: int) -> None:
        user, client_id = key
        self._manager.record_remote((user, client_id), amount, now_ms)

    def limit(self, key: Key) -> float | None:
        user, client_id = key
        limit = self._manager.limit_for_key((user, client_id))
        return None if limit is None or limit >= UNBOUNDED else limit

    def scale_throttles(self, scales: dict[Key, float]) -> None:
        self._manager.fallback_scale = {(key[0], key[1]): scale for key, scale in scales.items()}


class TopicBytesInShare:
    """Per-topic bytes-in thresholds: keys are ``(topic,)``."""

    kind = TOPIC_BYTES_IN
    key_arity = 1

    def __init__(self, quota: TopicBytesInQuota) -> None:
        self._quota = quota

    def local_totals(self) -> Iterator[tuple[Key, object, float]]:
        for topic, total in self._quota.accepted.items():
            yield (topic,), self._quota, float(total)

    def record_remote(self, key: Key, amount: float, now_ms: int) -> None:
        self._quota.record_remote(key[0], round(amount), now_ms)

    def limit(self, key: Key) -> float | None:
        return self._quota.threshold_for(key[0])

    def scale_throttles(self, scales: dict[Key, float]) -> None:
        """Thresholds refuse or delay whole requests by their own rule: nothing to scale."""


def shared_quotas(managers: QuotaManagers, topics: TopicBytesInQuota) -> tuple[SharedQuota, ...]:
    """Everything a fleet shares, request-time quotas excepted (they stay per worker), on
    both levels: client-id prefixes are sharing keys of the client level, tenants the
    tenant level's keys."""
    shares: tuple[SharedQuota, ...] = (
        ClientQuotaShare(PRODUCE, managers.produce),
        ClientQuotaShare(FETCH, managers.fetch),
        ClientQuotaShare(CONTROLLER_MUTATION, managers.controller),
        TopicBytesInShare(topics),
    )
    tenants = managers.tenants
    if tenants is not None:
        shares += (
            ClientQuotaShare(TENANT_PRODUCE, tenants.produce),
            ClientQuotaShare(TENANT_FETCH, tenants.fetch),
            ClientQuotaShare(TENANT_CONTROLLER_MUTATION, tenants.controller),
        )
    return shares
