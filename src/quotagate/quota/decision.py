"""One request's decision from its facts: what each quota records, and the one throttle.

:mod:`quotagate.quota.request_rules` says how a kind of request is charged (its
:class:`Charging`); this module applies that to one request, and is the only place where the
managers are told to record a request (tests/test_layers.py checks that no other module
calls their recording methods, the ``quotagate engine`` calculator aside). The rule steps,
in Kafka's order:

1. **Arrival** (:func:`admit`): a Produce records its size on ``producer_byte_rate``; a
   mutation request (CreateTopics, DeleteTopics, CreatePartitions) is admitted topic by topic
   on ``controller_mutation_rate`` (strict or permissive, :func:`admit_mutations`); error 89
   when a strict quota refused one.
2. **Response** (:func:`decide`): a Fetch records its response size on ``consumer_byte_rate``;
   then the request time is charged (or goes to the exempt sensor), the largest throttle wins
   (KIP-219, ties to the request quota), and a throttled fetch's bytes are taken back, since
   its data is not sent.

**Two levels** (issue 25). A request whose facts name a tenant is charged, at every step, to
its client quota (Kafka's eight levels) and to its tenant's quota (the managers'
``tenants`` level), each with Kafka's own sensors; a level's throttle is the larger of its
two, as Kafka takes the larger of the bandwidth and request throttles, so the response still
carries one throttle and the connection one mute. The decision's cause names the level that
won (``tenant_produce`` ...; the client's level on a tie), and the throttle time is recorded
on that level's sensor, as Kafka records it on the sensor of the quota that throttled. A
strict mutation quota admits a topic only while neither level's bucket is negative. A
request with no tenant touches the tenant level not at all. A principal of
``quota.exempt.principals`` is charged as usual (its usage stays visible) but never
throttled nor refused by a quota; the gateway's own topic bytes-in thresholds still apply
to it.

The replay knows every fact of a request at once (a usage event) and calls :func:`decide`
alone, which admits the request first. The gateway must act between the two steps (cut the
refused topics out of a request, stop reading from a throttled producer): its stages gather
the facts, call :func:`admit` when the request arrives and :func:`decide` once its response is
known, with the :class:`Admission` from the first step. Both run the same steps in the same
order at the request's one ``now_ms``, so a gateway run and its replay agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from quotagate.quota.controller_mutation import (
    THROTTLING_QUOTA_EXCEEDED,
    ControllerMutationQuota,
    ExemptMutationQuota,
    HierarchicalMutationQuota,
    ThrottlingQuotaExceeded,
    UnboundedControllerMutationQuota,
)
from quotagate.quota.managers import QuotaManagers
from quotagate.quota.request_rules import Charging, OtherQuota
from quotagate.quota.throttle_choice import Cause, choose_throttle

# Members bound once for the per-request functions below (an Enum class attribute lookup
# costs ~0.2 µs on CPython 3.11).
_NO_OTHER: Final = OtherQuota.NONE
_PRODUCE_QUOTA: Final = OtherQuota.PRODUCE
_FETCH_QUOTA: Final = OtherQuota.FETCH
_STRICT_MUTATION: Final = OtherQuota.STRICT_MUTATION
_PERMISSIVE_MUTATION: Final = OtherQuota.PERMISSIVE_MUTATION
_PRODUCE_CAUSE: Final = Cause.PRODUCE
_FETCH_CAUSE: Final = Cause.FETCH
_MUTATION_CAUSE: Final = Cause.CONTROLLER_MUTATION
_TENANT_PRODUCE_CAUSE: Final = Cause.TENANT_PRODUCE
_TENANT_FETCH_CAUSE: Final = Cause.TENANT_FETCH
_TENANT_REQUEST_CAUSE: Final = Cause.TENANT_REQUEST
_TENANT_MUTATION_CAUSE: Final = Cause.TENANT_CONTROLLER_MUTATION
_REQUEST_CAUSE: Final = Cause.REQUEST


# Plain classes with their own __init__, not dataclasses: compiled, they are built natively
# (a dataclass's generated __init__ cost the replay ~1.5 µs per event, a fifth of it).


class RequestFacts:
    """What the rules need to know of one request: a usage event's fields, or what the
    gateway's stages noted as the request and its response passed. Read-only by convention.

    ``user`` as the managers take it (``alice`` for ``User:alice``); ``now_ms`` when the
    request was read (every quota decision of the request uses it); ``request_bytes`` header
    and body, as Kafka's ``request.sizeInBytes`` counts them; ``response_bytes`` a fetch's
    size as ``FetchResponse.sizeOf`` counts it, -1 while unknown (nothing is recorded);
    ``mutation_counts`` partition mutations per topic, in request order; ``request_time_ns``
    the request time charged (gateway time, plus upstream time where it counts);
    ``empties_throttled_fetch``: a throttled fetch is answered empty, so its bytes are taken
    back (the gateway cannot build that answer for every version, and then sends the data,
    charged); ``tenant`` the tenant ``tenant.mapping.rules`` maps the request's user and
    client id to, "" for none (the usage event's ``tenant``).
    """

    __slots__ = (
        "api_key",
        "api_version",
        "charging",
        "client_id",
        "empties_throttled_fetch",
        "mutation_counts",
        "now_ms",
        "request_bytes",
        "request_time_ns",
        "response_bytes",
        "tenant",
        "user",
    )

    def __init__(
        self,
        charging: Charging,
        user: str,
        client_id: str,
        api_key: int,
        api_version: int,
        now_ms: int,
        request_bytes: int = 0,
        response_bytes: int = -1,
        mutation_counts: Sequence[int] = (),
        request_time_ns: int = 0,
        empties_throttled_fetch: bool = True,
        tenant: str = "",
    ) -> None:
        self.charging = charging
        self.user = user
        self.client_id = client_id
        self.api_key = api_key
        self.api_version = api_version
        self.now_ms = now_ms
        self.request_bytes = request_bytes
        self.response_bytes = response_bytes
        self.mutation_counts = mutation_counts
        self.request_time_ns = request_time_ns
        self.empties_throttled_fetch = empties_throttled_fetch
        self.tenant = tenant


class Admission:
    """What a request's arrival cost, known before it is forwarded: the produce quota's
    throttle and the level it came from (``cause``); the request's controller-mutation quota
    (which throttles once the response is known) and, per topic in request order, whether it
    was admitted; THROTTLING_QUOTA_EXCEEDED when a strict mutation quota refused a topic."""

    __slots__ = ("admitted", "cause", "error_code", "mutation_quota", "throttle_ms")

    def __init__(
        self,
        throttle_ms: int = 0,
        mutation_quota: ControllerMutationQuota | None = None,
        admitted: Sequence[bool] = (),
        error_code: int = 0,
        cause: Cause = _PRODUCE_CAUSE,
    ) -> None:
        self.throttle_ms = throttle_ms
        self.mutation_quota = mutation_quota
        self.admitted = admitted
        self.error_code = error_code
        self.cause = cause


NOT_ADMITTED: Final = Admission()
"""An arrival that throttles nothing: a request the gateway left to the upstream, or a
produce within its quota. Shared: an admission is never changed."""

Decision = tuple[int, Cause, int]
"""(throttle ms, cause, error code the quotas imposed or 0): a plain tuple, made once per
request of every replay."""


def admit(managers: QuotaManagers, facts: RequestFacts) -> Admission:
    """Step 1, as the request arrives: the produce quota, or the mutation quota topic by topic."""
    other = facts.charging.other
    if other is _PRODUCE_QUOTA:
        user = facts.user
        throttle_ms = managers.produce.record_and_get_throttle_ms(
            user, facts.client_id, facts.request_bytes, facts.now_ms
        )
        cause = _PRODUCE_CAUSE
        if facts.tenant:
            tenants = managers.tenants
            if tenants is not None:
                tenant_ms = tenants.produce.record_and_get_throttle_ms(
                    facts.tenant, "", facts.request_bytes, facts.now_ms
                )
                if tenant_ms > throttle_ms:
                    throttle_ms, cause = tenant_ms, _TENANT_PRODUCE_CAUSE
        if throttle_ms and managers.exempt_users and user in managers.exempt_users:
            throttle_ms = 0
        # Nearly every produce passes: share one answer rather than make one per request.
        return Admission(throttle_ms, cause=cause) if throttle_ms else NOT_ADMITTED
    if other is _STRICT_MUTATION or other is _PERMISSIVE_MUTATION:
        quota = mutation_quota(managers, facts)
        admitted = admit_mutations(quota, facts.mutation_counts, facts.now_ms)
        error = 0 if all(admitted) else THROTTLING_QUOTA_EXCEEDED
        return Admission(0, quota, admitted, error)
    return NOT_ADMITTED


def mutation_quota(managers: QuotaManagers, facts: RequestFacts) -> ControllerMutationQuota:
    """The request's KIP-599 quota: its client's, joined by its tenant's when it has one,
    metered only for an exempt principal."""
    now_ms = facts.now_ms
    quota = managers.controller.new_quota_for(
        facts.api_key, facts.api_version, facts.user, facts.client_id, now_ms
    )
    tenants = managers.tenants
    if facts.tenant and tenants is not None:
        tenant_quota = tenants.controller.new_quota_for(
            facts.api_key, facts.api_version, facts.tenant, "", now_ms
        )
        if not isinstance(tenant_quota, UnboundedControllerMutationQuota):
            # Client level first, the tenant's second: mutation_throttle names the winner.
            quota = HierarchicalMutationQuota((quota, tenant_quota))
    if managers.exempt_users and facts.user in managers.exempt_users:
        return ExemptMutationQuota(quota)
    return quota


def decide(
    managers: QuotaManagers,
    facts: RequestFacts,
    admission: Admission | None = None,
    gateway_throttles: tuple[tuple[Cause, int], ...] = (),
) -> Decision:
    """The request's decision. ``admission``: what :func:`admit` returned as the request
    arrived (None: admit it now, every fact being known); ``gateway_throttles``: throttles
    the gateway alone imposes (topic bytes-in thresholds), ranked after the client quotas."""
    other = facts.charging.other
    error = 0
    taken_back = -1
    others: tuple[tuple[Cause, int], ...] = ()
    if other is _FETCH_QUOTA:
        fetched = facts.response_bytes
        fetch_ms = 0
        fetch_cause = _FETCH_CAUSE
        if fetched >= 0:
            fetch_ms = managers.fetch.record_and_get_throttle_ms(
                facts.user, facts.client_id, fetched, facts.now_ms
            )
            if facts.tenant:
                tenants = managers.tenants
                if tenants is not None:
                    tenant_ms = tenants.fetch.record_and_get_throttle_ms(
                        facts.tenant, "", fetched, facts.now_ms
                    )
                    if tenant_ms > fetch_ms:
                        fetch_ms, fetch_cause = tenant_ms, _TENANT_FETCH_CAUSE
            if facts.empties_throttled_fetch:
                taken_back = fetched
        others = ((fetch_cause, fetch_ms),)
    elif other is not _NO_OTHER:  # charged on arrival: produce, mutations
        if admission is None:
            admission = admit(managers, facts)
        error = admission.error_code
        quota = admission.mutation_quota
        if other is _PRODUCE_QUOTA:
            others = ((admission.cause, admission.throttle_ms),)
        elif quota is not None:
            others = (mutation_throttle(quota, facts.now_ms),)
    exempt = bool(managers.exempt_users) and facts.user in managers.exempt_users
    if exempt:
        others = ()  # metered above, throttled by no quota
    if gateway_throttles:
        others += gateway_throttles
    throttle_ms, cause = settle(
        managers,
        facts.charging,
        facts.user,
        facts.client_id,
        facts.request_time_ns,
        others,
        facts.now_ms,
        taken_back,
        facts.tenant,
        exempt,
    )
    return throttle_ms, cause, error


def mutation_throttle(quota: ControllerMutationQuota, now_ms: int) -> tuple[Cause, int]:
    """A mutation quota's throttle and the level it comes from (the client's on a tie)."""
    if isinstance(quota, HierarchicalMutationQuota):
        throttle_ms, level = quota.throttle_level(now_ms)
        return (_TENANT_MUTATION_CAUSE if level else _MUTATION_CAUSE), throttle_ms
    return _MUTATION_CAUSE, quota.throttle_time(now_ms)


def admit_mutations(
    quota: ControllerMutationQuota, counts: Sequence[int], now_ms: int
) -> list[bool]:
    """KIP-599: each topic's partition mutations, in request order; which were admitted.

    A strict quota refuses a topic while its bucket is already negative (the topics after it
    may still pass once they fit); a permissive one admits all and throttles afterwards.
    A topic with nothing to mutate is admitted: the upstream decides its fate.
    """
    admitted: list[bool] = []
    for count in counts:
        if count > 0:
            try:
                quota.record(count, now_ms)
            except ThrottlingQuotaExceeded:
                admitted.append(False)
                continue
        admitted.append(True)
    return admitted


def settle(
    managers: QuotaManagers,
    charging: Charging,
    user: str,
    client_id: str,
    request_time_ns: int,
    others: Iterable[tuple[Cause, int]],
    now_ms: int,
    fetch_bytes: int = -1,
    tenant: str = "",
    exempt: bool = False,
) -> tuple[int, Cause]:
    """The KIP-219 step once every other quota has spoken: request time (on both levels),
    the winner, the fetch bytes taken back (from both). Returns (throttle ms, cause)."""
    request = managers.request
    tenants = managers.tenants if tenant else None
    request_cause = _REQUEST_CAUSE
    if charging.request_time:
        request_ms = request.record_nanos_and_get_throttle_ms(
            user, client_id, request_time_ns, now_ms
        )
        if tenants is not None:
            tenant_ms = tenants.request.record_nanos_and_get_throttle_ms(
                tenant, "", request_time_ns, now_ms
            )
            if tenant_ms > request_ms:
                request_ms, request_cause = tenant_ms, _TENANT_REQUEST_CAUSE
        if exempt:
            request_ms = 0
    else:
        request.record_exempt(request_time_ns, now_ms)
        request_ms = 0
    throttle_ms, cause = choose_throttle(request_ms, others, request_cause)
    if throttle_ms > 0 and fetch_bytes >= 0:
        managers.fetch.unrecord(user, client_id, fetch_bytes, now_ms)
        if tenants is not None:
            tenants.fetch.unrecord(tenant, "", fetch_bytes, now_ms)
    return throttle_ms, cause
