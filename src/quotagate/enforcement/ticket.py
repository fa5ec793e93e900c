"""What the quota stages note about one request between reading it and answering it.

Every quota decision of a request uses ``now_ms = ticket.now_ms``, the wall-clock epoch
millisecond at which the request was read (the usage event's ``ts_ms``), so that replaying
usage events through the engine reproduces the gateway's throttles (docs/quotas.md). The
facts noted here are the engine's :class:`RequestFacts` (:meth:`QuotaTicket.facts`), gathered
as the request and its response pass; the usage event carries them, so that the replay
decides the request by the same :func:`quotagate.quota.decide`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from quotagate.gateway import Exchange, StateKey
from quotagate.quota import (
    Admission,
    Cause,
    Charging,
    ControllerMutationQuota,
    OtherQuota,
    RequestFacts,
    classify,
    mutation_throttle,
)
from quotagate.usage.writer import UsageRow

# Enum members bound once for the per-request path (an Enum attribute lookup costs ~0.2 µs).
_PRODUCE_QUOTA: Final = OtherQuota.PRODUCE
_PRODUCE: Final = Cause.PRODUCE
_MUTATION: Final = Cause.CONTROLLER_MUTATION
_TOPIC_BYTES_IN: Final = Cause.TOPIC_BYTES_IN
_CAUSE_TEXT: Final = {cause: cause.value for cause in Cause}  # .value costs as much

# classify() is cached too, but its keyword arguments make each look-up cost ~0.5 µs; a
# plain dict on a tuple costs a fifth of that, on every request.
_CHARGINGS: dict[tuple[int, int, int | None, bool, bool], Charging] = {}
_CHARGINGS_MAX: Final = 4096


class QuotaTicket:
    """One request's quota facts and state. A plain class with its own ``__init__``, not a
    dataclass: compiled, it is built natively (a dataclass's generated ``__init__`` runs as
    Python, ~1 µs of every request).

    ``user`` is the principal as the quota managers take it (``alice`` for ``User:alice``);
    ``acks`` is a Produce's; ``validate_only`` marks a mutation request that only validates
    (not charged to the mutation quota); ``admission`` is what the request's arrival cost
    (:func:`quotagate.quota.admit`), where a stage charged it before forwarding;
    ``topic_bytes_in_ms`` the gateway's own throttle (topic bytes-in thresholds);
    ``fetch_bytes`` the fetch response's size as the fetch quota counts it (-1: not a counted
    fetch); ``fetch_empty`` builds the empty fetch response that replaces a throttled one;
    ``topics`` are a Produce's record bytes or a mutation's partition mutations per topic;
    ``error_code`` the first error the gateway itself imposed; ``tenant`` the request's
    tenant (``tenant.mapping.rules``), "" for none.
    """

    __slots__ = (
        "acks",
        "admission",
        "client_id",
        "error_code",
        "fetch_bytes",
        "fetch_empty",
        "finished",
        "follower_fetch",
        "hold",
        "now_ms",
        "partition_mutations",
        "request_bytes",
        "tenant",
        "topic_bytes_in_ms",
        "topics",
        "user",
        "validate_only",
    )

    def __init__(
        self, now_ms: int, user: str, client_id: str, request_bytes: int, tenant: str = ""
    ) -> None:
        self.now_ms = now_ms
        self.user = user
        self.client_id = client_id
        self.request_bytes = request_bytes
        self.tenant = tenant
        self.acks: int | None = None
        self.follower_fetch = False
        self.validate_only = False
        self.admission: Admission | None = None
        self.topic_bytes_in_ms = 0
        self.fetch_bytes = -1
        self.fetch_empty: Callable[[int], Any] | None = None
        self.topics: list[tuple[str, int]] = []
        self.partition_mutations = 0
        self.error_code = 0
        self.hold = False
        self.finished = False

    @property
    def produce_ms(self) -> int:
        """The produce quota's throttle, known on arrival."""
        return self.admission.throttle_ms if self.admission is not None else 0

    @property
    def mutation_quota(self) -> ControllerMutationQuota | None:
        return self.admission.mutation_quota if self.admission is not None else None

    def impose_error(self, code: int) -> None:
        if not self.error_code:
            self.error_code = code

    def charging(self, api_key: int, api_version: int) -> Charging:
        key = (api_key, api_version, self.acks, self.follower_fetch, self.validate_only)
        charging = _CHARGINGS.get(key)
        if charging is None:
            if len(_CHARGINGS) >= _CHARGINGS_MAX:
                _CHARGINGS.clear()  # the key holds what clients sent: never let it grow
            charging = _CHARGINGS[key] = classify(
                api_key,
                api_version,
                acks=self.acks,
                follower=self.follower_fetch,
                validate_only=self.validate_only,
            )
        return charging

    def facts(
        self,
        charging: Charging,
        api_key: int,
        api_version: int,
        request_time_ns: int = 0,
        mutation_counts: Sequence[int] = (),
    ) -> RequestFacts:
        """What the engine decides this request by, as far as it is known now; ``charging``
        is :meth:`charging` of the request."""
        return RequestFacts(
            charging,
            self.user,
            self.client_id,
            api_key,
            api_version,
            self.now_ms,
            self.request_bytes,
            self.fetch_bytes,
            mutation_counts,
            request_time_ns,
            self.fetch_empty is not None,
            self.tenant,
        )

    def gateway_throttles(self) -> tuple[tuple[Cause, int], ...]:
        """The throttles the gateway imposes beside the client quotas (bytes-in thresholds)."""
        if self.topic_bytes_in_ms > 0:
            return ((_TOPIC_BYTES_IN, self.topic_bytes_in_ms),)
        return ()

    def other_throttles(self, other: OtherQuota) -> tuple[tuple[Cause, int], ...]:
        """What the quotas charged on arrival said, in the order ties are broken (the fetch
        quota speaks only once the response is known, in :func:`quotagate.quota.decide`)."""
        if other is _PRODUCE_QUOTA:
            cause = self.admission.cause if self.admission is not None else _PRODUCE
            return (cause, self.produce_ms), (_TOPIC_BYTES_IN, self.topic_bytes_in_ms)
        if self.mutation_quota is not None:
            return (mutation_throttle(self.mutation_quota, self.now_ms),)
        return ()

    def usage_row(
        self,
        exchange: Exchange,
        gateway_id: str,
        gateway_us: int,
        upstream_us: int,
        throttle_ms: int,
        cause: Cause,
        shadow_throttle_ms: int | None = None,
    ) -> UsageRow:
        """The request's usage event, as the row :meth:`UsageWriter.add` takes (the fields
        of :class:`quotagate.usage.schema.UsageEvent`, in order: no object per event)."""
        frame = exchange.response_frame
        response_bytes = len(frame) - 4 if frame is not None else 0
        if self.fetch_bytes >= 0:
            response_bytes = self.fetch_bytes  # what the fetch quota counted
        connection = exchange.connection
        header = exchange.header
        return (
            self.now_ms,  # ts_ms
            gateway_id,
            connection.listener,
            connection.principal or "",
            self.client_id,
            connection.client_address,  # client_host
            header.api_key,
            header.api_version,
            self.request_bytes,
            response_bytes,
            self.topics,
            self.partition_mutations,
            self.acks,
            self.follower_fetch,  # follower
            self.validate_only,
            gateway_us,  # gateway_time_us
            upstream_us,  # upstream_time_us
            throttle_ms,
            _CAUSE_TEXT[cause],  # throttle_cause
            self.error_code,
            self.tenant,
            shadow_throttle_ms,  # null: no shadow quota was set
        )


TICKET_KEY: Final = StateKey[QuotaTicket]("quota.ticket")
