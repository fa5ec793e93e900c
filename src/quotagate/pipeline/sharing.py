"""Sharing keys of observed clients, resolved by the engine, and replay groups.

Spark never re-derives Kafka's eight-level resolution: the distinct (principal, client id)
pairs are collected, resolved on the driver by the engine's own ``sharing_key`` and
``quota_limit``, and joined back as a small table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from quotagate.pipeline.quotas import QUOTA_TYPES, candidate_tenants, managers_by_type
from quotagate.quota import UNBOUNDED, QuotaFile, principal_user
from quotagate.quota.quota_config import TENANT


@dataclass(frozen=True, slots=True)
class Resolution:
    principal: str
    client_id: str
    quota_type: str
    share_user: str  # sanitised user tag, "" when the user is not in the key
    share_client: str
    entity_user: str | None  # raw names of the key's entity, for quota files and reports
    entity_client: str | None
    limit: float | None  # None: no quota applies


def resolve_pairs(quota_file: QuotaFile, pairs: Iterable[tuple[str, str]]) -> list[Resolution]:
    managers = managers_by_type(quota_file)
    out: list[Resolution] = []
    for principal, client_id in pairs:
        user = principal_user(principal)
        for quota_type in QUOTA_TYPES:
            manager = managers[quota_type]
            share_user, share_client = manager.sharing_key(user, client_id)
            limit = manager.quota_limit(user, client_id)
            out.append(
                Resolution(
                    principal=principal,
                    client_id=client_id,
                    quota_type=quota_type,
                    share_user=share_user,
                    share_client=share_client,
                    entity_user=user if share_user else None,
                    entity_client=client_id if share_client else None,
                    limit=None if limit >= UNBOUNDED else limit,
                )
            )
    return out


def has_tenant_quotas(quota_file: QuotaFile) -> bool:
    """Whether the file configures any tenant quota (then a tenant's members share sensors)."""
    return any(TENANT in entry.entity for entry in quota_file.entries)


def replay_groups(
    quota_file: QuotaFile,
    pairs: Iterable[tuple[str, str]],
    tenants: Iterable[tuple[str, str, str]] = (),
) -> dict[tuple[str, str], int]:
    """Group id per pair: clients that share any enabled quota's key replay together.

    Groups are the connected components of "shares a sensor with": only then can each
    group run on its own engine instance and still see exactly what one engine would.
    Types without any configured quota record nothing, so they join nobody. ``tenants``:
    the (principal, client id, tenant) seen in the events; when the file has tenant quotas,
    the pairs of one tenant share its sensors and join one group (without tenant quotas the
    tenant level records nothing and the groups are the clients' alone). When the file gives
    ``tenant.mapping.rules``, its rules name every pair's tenant instead, as the replay
    charges them (``replay.core``), and the recorded tenants are not read.
    """
    managers = managers_by_type(quota_file)
    enabled = [m for m in managers.values() if m.quotas_enabled]
    tenants = list(tenants)
    pair_list = list(dict.fromkeys([*pairs, *((p, c) for p, c, _ in tenants)]))
    mapper = candidate_tenants(quota_file)
    if mapper is not None:
        tenants = [(p, c, mapper.tenant(principal_user(p), c)) for p, c in pair_list]
    memberships = [(p, c, t) for p, c, t in tenants if t] if has_tenant_quotas(quota_file) else []
    parent = list(range(len(pair_list)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(key: tuple[int, str, str], i: int) -> None:
        root_a, root_b = find(owner.setdefault(key, i)), find(i)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)

    owner: dict[tuple[int, str, str], int] = {}
    for i, (principal, client_id) in enumerate(pair_list):
        user = principal_user(principal)
        for index, manager in enumerate(enabled):
            join((index, *manager.sharing_key(user, client_id)), i)
    index_of = {pair: i for i, pair in enumerate(pair_list)}
    for principal, client_id, tenant in memberships:
        join((len(enabled), tenant, ""), index_of[(principal, client_id)])
    return {pair: find(i) for i, pair in enumerate(pair_list)}
