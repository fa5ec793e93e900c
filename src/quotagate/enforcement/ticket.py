"""What the quota stages note about one request between reading it and answering it.

Every quota decision of a request uses ``now_ms = ticket.now_ms``, the wall-clock epoch
millisecond at which the request was read (the usage event's ``ts_ms``), so that replaying
usage events through the engine reproduces the gateway's throttles (docs/quotas.md). The
facts noted here are the ones :mod:`quotagate.quota.request_rules` classifies a request by,
and the usage event carries them so that the replay classifies it the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from quotagate.gateway import Exchange, StateKey
from quotagate.quota import Cause, Charging, ControllerMutationQuota, OtherQuota, classify
from quotagate.usage.writer import UsageRow

# Enum members bound once for the per-request path (an Enum attribute lookup costs ~0.2 µs).
_PRODUCE_QUOTA: Final = OtherQuota.PRODUCE
_FETCH_QUOTA: Final = OtherQuota.FETCH
_PRODUCE: Final = Cause.PRODUCE
_FETCH: Final = Cause.FETCH
_MUTATION: Final = Cause.CONTROLLER_MUTATION
_TOPIC_BYTES_IN: Final = Cause.TOPIC_BYTES_IN
_CAUSE_TEXT: Final = {cause: cause.value for cause in Cause}  # .value costs as much

# classify() is cached too, but its keyword arguments make each look-up cost ~0.5 µs; a
# plain dict on a tuple costs a fifth of that, on every request.
_CHARGINGS: dict[tuple[int, int, int | None, bool, bool], Charging] = {}
_CHARGINGS_MAX: Final = 4096


@dataclass(slots=True)
class QuotaTicket:
    now_ms: int
    user: str
    """Principal name as the quota managers take it (``alice`` for ``User:alice``)."""
    client_id: str
    request_bytes: int
    acks: int | None = None
    """Produce only."""
    follower_fetch: bool = False
    validate_only: bool = False
    """A mutation request that only validates: not charged to the mutation quota."""
    produce_ms: int = 0
    topic_bytes_in_ms: int = 0
    mutation_quota: ControllerMutationQuota | None = None
    fetch_bytes: int = -1
    """Bytes recorded on the fetch quota (-1: nothing recorded)."""
    fetch_ms: int = 0
    fetch_empty: Callable[[int], Any] | None = None
    """Builds the empty fetch response that replaces a throttled one."""
    topics: list[tuple[str, int]] = field(default_factory=list)
    """Produce: record bytes per topic; mutations: partition mutations per topic."""
    partition_mutations: int = 0
    error_code: int = 0
    """The first error the gateway itself imposed."""
    hold: bool = False
    finished: bool = False

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

    def other_throttles(self, other: OtherQuota) -> tuple[tuple[Cause, int], ...]:
        """What the other quotas said, in the order ties are broken."""
        if other is _PRODUCE_QUOTA:
            return (_PRODUCE, self.produce_ms), (_TOPIC_BYTES_IN, self.topic_bytes_in_ms)
        if other is _FETCH_QUOTA:
            return ((_FETCH, self.fetch_ms),)
        if self.mutation_quota is not None:
            return ((_MUTATION, self.mutation_quota.throttle_time(self.now_ms)),)
        return ()

    def usage_row(
        self,
        exchange: Exchange,
        gateway_id: str,
        gateway_us: int,
        upstream_us: int,
        throttle_ms: int,
        cause: Cause,
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
        )


TICKET_KEY: Final = StateKey[QuotaTicket]("quota.ticket")
