"""Shadow quotas: candidate quotas decided on the live traffic, enforced on nobody.

The shadow set (the store's ``shadow.<key>`` values, :mod:`quotagate.quota.shadow_keys`) is
held by a second :class:`QuotaManagers`. Every request the gateway finishes is decided on it by
the same :func:`quotagate.quota.admit` and :func:`quotagate.quota.decide`, fed the same
:class:`RequestFacts` as the live decision and as a replay of the request's usage event: what
*would* have happened (the throttle, the mutations a strict quota would have refused) is
counted here and written into the usage event's ``shadow_throttle_ms``, and nothing a client
sees changes: no mute, no ``throttle_time_ms``, no refused topic.

With no shadow quota the set is inactive and the throttle stage holds ``None`` instead of it:
the hot path pays one ``is not None`` per request (BENCHMARKS.md).

The metrics (``quotagate_shadow_*``) are labelled by sharing key, the ``(user, client_id)``
the shadow quota measures, as the live ones are: keys with no shadow quota never appear,
and a key's series go when its shadow sensors expire (one hour idle, as Kafka's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Final

from quotagate.enforcement.ticket import QuotaTicket
from quotagate.quota import (
    NOT_ADMITTED,
    Charging,
    OtherQuota,
    QuotaManagers,
    RequestFacts,
    SharingKey,
    admit,
    decide,
)
from quotagate.quota.fleet_shares import (
    CONTROLLER_MUTATION,
    FETCH,
    PRODUCE,
    ClientQuotaShare,
    SharedQuota,
)
from quotagate.quota.java import UNBOUNDED
from quotagate.quota.shadow_keys import shadow_key

SeriesPoints = list[tuple[list[str], float]]

# Series names (``quotagate_`` is added by the collector); the counters get ``_total``.
WOULD_THROTTLE_SECONDS: Final = "shadow_would_throttle_seconds"
WOULD_THROTTLE_REQUESTS: Final = "shadow_would_throttle_requests"
REFUSED_MUTATIONS: Final = "shadow_refused_mutations"
REFUSED_REQUESTS: Final = "shadow_refused_requests"
WOULD_THROTTLE_RATIO: Final = "shadow_would_throttle_ratio"
TENANT_WOULD_THROTTLE_RATIO: Final = "shadow_tenant_would_throttle_ratio"
COUNTERS: Final = frozenset(
    {WOULD_THROTTLE_SECONDS, WOULD_THROTTLE_REQUESTS, REFUSED_MUTATIONS, REFUSED_REQUESTS}
)


class ShadowQuotas:
    """The shadow set's managers and what they would have done, per sharing key."""

    def __init__(
        self,
        window_num: int = 11,
        window_size_s: int = 1,
        controller_window_num: int = 11,
        controller_window_size_s: int = 1,
    ) -> None:
        self.managers = QuotaManagers.create(
            window_num, window_size_s, controller_window_num, controller_window_size_s
        )
        self.on_active: Callable[[ShadowQuotas | None], None] = lambda _: None
        """Told the set (or None) whenever it becomes active or inactive."""
        self.active = False
        self._values: set[tuple[tuple[tuple[str, str | None], ...], str]] = set()
        self._would_throttle_ms: dict[SharingKey, int] = {}
        self._would_throttle_requests: dict[SharingKey, int] = {}
        self._refused_mutations: dict[SharingKey, int] = {}
        self._refused_requests: dict[SharingKey, int] = {}

    # -- configuration -------------------------------------------------------------------

    def update_quota(self, entity: Mapping[str, str | None], key: str, value: float | None) -> None:
        """Set or remove one shadow value (``key`` the live key it shadows)."""
        self.managers.update_quota(entity, key, value)
        # Counted here: a manager stays "enabled" once it had a quota, as Kafka's does.
        value_key = (tuple(sorted(entity.items())), key)
        if value is None:
            self._values.discard(value_key)
        else:
            self._values.add(value_key)
        active = bool(self._values)
        if active != self.active:
            self.active = active
            self.on_active(self if active else None)

    # -- per request ---------------------------------------------------------------------

    def observe(self, facts: RequestFacts) -> int:
        """Decide one finished request on the shadow set; its would-be throttle in ms.

        Admitted here, at the end, with every fact known: the replay's order too, so a
        replay of the usage events with the shadow values as the candidate agrees."""
        managers = self.managers
        admission = admit(managers, facts)
        throttle_ms, cause, _ = decide(managers, facts, admission)
        user, client_id = facts.user, facts.client_id
        if throttle_ms > 0:
            manager = managers.by_cause(cause) or managers.request
            key = manager.sharing_key(user, client_id)
            _bump(self._would_throttle_ms, key, throttle_ms)
            _bump(self._would_throttle_requests, key, 1)
        if admission is not NOT_ADMITTED and admission.error_code:
            refused = sum(1 for ok in admission.admitted if not ok)
            key = managers.controller.sharing_key(user, client_id)
            _bump(self._refused_mutations, key, refused)
            _bump(self._refused_requests, key, 1)
        return throttle_ms

    def fleet_shares(self) -> tuple[SharedQuota, ...]:
        """The shadow quotas a fleet shares, as the live ones (kinds ``shadow.<kind>``, which
        a worker without them ignores); request time stays per worker, as the live one does."""
        managers = self.managers
        return (
            ClientQuotaShare(shadow_key(PRODUCE), managers.produce),
            ClientQuotaShare(shadow_key(FETCH), managers.fetch),
            ClientQuotaShare(shadow_key(CONTROLLER_MUTATION), managers.controller),
        )

    def tick(self, now_ms: int) -> None:
        self.managers.tick(now_ms)

    # -- metrics -------------------------------------------------------------------------

    def series(self, now_ms: int) -> dict[str, SeriesPoints]:
        """The ``quotagate_shadow_*`` series, for the runtime's snapshot."""
        out: dict[str, SeriesPoints] = {}
        ratio: dict[SharingKey, float] = {}
        live_keys: set[SharingKey] = set()
        for group, manager, value_name in (
            ("produce", self.managers.produce, "byte_rate"),
            ("fetch", self.managers.fetch, "byte_rate"),
            ("request", self.managers.request, "request_time"),
            ("controllermutation", self.managers.controller, "tokens"),
        ):
            if not manager.quotas_enabled:
                continue
            for state in manager.states(now_ms):
                live_keys.add(state.key)
                if state.limit >= UNBOUNDED:
                    continue  # measured, but no shadow quota bounds this key
                labels = [state.key[0], state.key[1]]
                out.setdefault(f"shadow_{group}_{value_name}", []).append((labels, state.value))
                out.setdefault(f"shadow_{group}_quota", []).append((labels, state.limit))
                if value_name != "tokens" and state.value > 0 and not math.isnan(state.value):
                    # The share of its time the key would spend throttled, were the shadow
                    # quota live: Kafka's throttle T = (O - Q) / Q x W mutes a client sending
                    # at O for T after each W, so its share is T / (W + T) = 1 - Q / O.
                    share = max(0.0, 1.0 - state.limit / state.value)
                    ratio[state.key] = max(ratio.get(state.key, 0.0), share)
        for key, share in ratio.items():
            out.setdefault(WOULD_THROTTLE_RATIO, []).append(([key[0], key[1]], share))
        self._tenant_series(now_ms, out)
        for name, counts, scale in (
            (WOULD_THROTTLE_SECONDS, self._would_throttle_ms, 0.001),
            (WOULD_THROTTLE_REQUESTS, self._would_throttle_requests, 1.0),
            (REFUSED_MUTATIONS, self._refused_mutations, 1.0),
            (REFUSED_REQUESTS, self._refused_requests, 1.0),
        ):
            for key in [k for k in counts if k not in live_keys]:
                del counts[key]  # its sensors expired: the label set goes, as live ones do
            points = [([key[0], key[1]], value * scale) for key, value in counts.items()]
            if points:
                out[name] = points
        return out

    def _tenant_series(self, now_ms: int, out: dict[str, SeriesPoints]) -> None:
        """``shadow_tenant_*``: the tenant level's shadow quotas, labelled by the tenant, as
        the live tenant level is exported (its would-throttle ratio from its own sensor)."""
        tenants = self.managers.tenants
        if tenants is None:
            return
        ratio: dict[str, float] = {}
        for group, manager, value_name in tenants.kinds():
            for state in manager.states(now_ms):
                if state.limit >= UNBOUNDED:
                    continue
                labels = [state.key[0]]
                out.setdefault(f"shadow_tenant_{group}_{value_name}", []).append(
                    (labels, state.value)
                )
                out.setdefault(f"shadow_tenant_{group}_quota", []).append((labels, state.limit))
                if value_name != "tokens" and state.value > 0 and not math.isnan(state.value):
                    share = max(0.0, 1.0 - state.limit / state.value)  # as a client key's
                    ratio[state.key[0]] = max(ratio.get(state.key[0], 0.0), share)
        for tenant, share in ratio.items():
            out.setdefault(TENANT_WOULD_THROTTLE_RATIO, []).append(([tenant], share))


_MUTATIONS: Final = (OtherQuota.STRICT_MUTATION, OtherQuota.PERMISSIVE_MUTATION)


def shadow_facts(
    ticket: QuotaTicket, charging: Charging, api_key: int, api_version: int, request_time_ns: int
) -> RequestFacts:
    """The facts of a finished request as a replay reads them from its usage event: the
    mutation counts per topic, and a throttled fetch taken back (were the shadow quota live,
    the fetch stage would answer it empty)."""
    counts = [count for _, count in ticket.topics] if charging.other in _MUTATIONS else ()
    return RequestFacts(
        charging,
        ticket.user,
        ticket.client_id,
        api_key,
        api_version,
        ticket.now_ms,
        ticket.request_bytes,
        ticket.fetch_bytes,
        counts,
        request_time_ns,
        True,
        ticket.tenant,
    )


def _bump(counts: dict[SharingKey, int], key: SharingKey, amount: int) -> None:
    counts[key] = counts.get(key, 0) + amount
