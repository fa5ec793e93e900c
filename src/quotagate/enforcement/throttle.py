"""KIP-219 for every request: the last word on throttling, and the usage event.

This stage must come first among the quota stages: it sees every request first (opening the
request's :class:`QuotaTicket` at the moment it was read) and every response last, after
the other quota stages noted their throttles. There it charges the request-time quota, takes
the largest throttle (ties go to the request quota), records it in the winning quota's
throttle-time sensor only, writes it into ``throttle_time_ms`` where the version has the
field (a throttled fetch: what is left of it), mutes the connection for that long whatever
the version, and emits the usage event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from quotagate.enforcement.shadow import ShadowQuotas, shadow_facts
from quotagate.enforcement.ticket import QuotaTicket
from quotagate.gateway import ConnectionInfo, Exchange, Stage
from quotagate.protocol import api_table
from quotagate.quota import NOT_ADMITTED, Cause, QuotaManagers, decide
from quotagate.quota.throttle_choice import TENANT_CAUSES
from quotagate.usage.sink import UsageSink

_DECIDED_ON_ARRIVAL = frozenset({Cause.CONTROLLER_MUTATION, Cause.TENANT_CONTROLLER_MUTATION})
"""Throttles whose clock Kafka starts before the upstream work: the controller's check."""


def remaining_ms(throttle_ms: int, since: float, now: float) -> int:
    """What is left at ``now`` of a throttle whose clock started at ``since`` (monotonic
    seconds): Kafka's ``max(0, throttle - (now - recorded))``, in whole milliseconds."""
    return max(throttle_ms - int((now - since) * 1000), 0)


class ResponseThrottle:
    """The KIP-219 step of every request, once: the decision (:func:`quotagate.quota.decide`
    on the facts the stages gathered), the throttle recorded in the winning quota's
    throttle-time sensor only, ``throttle_time_ms`` written, the connection muted, the usage
    event emitted."""

    def __init__(self, managers: QuotaManagers, gateway_id: str) -> None:
        self.managers = managers
        self.gateway_id = gateway_id
        self.usage: UsageSink | None = None
        """Set while the runtime runs with a ``[usage]`` sink."""
        self.topic_throttles = 0
        self.shadow: ShadowQuotas | None = None
        """The shadow set while it holds a quota (:meth:`set_shadow`); None costs nothing."""

    def set_shadow(self, shadow: ShadowQuotas | None) -> None:
        self.shadow = shadow

    def finish(self, exchange: Exchange, ticket: QuotaTicket) -> None:
        """The KIP-219 step: request-time quota, max of all throttles, mute, usage event."""
        if ticket.finished:
            return
        ticket.finished = True
        if exchange.connection.principal is None:
            # Before SASL authentication (ApiVersions, the exchange itself) nobody is named
            # yet. Kafka's authenticator answers these requests itself: its request log and
            # its quotas never see them, and neither do the gateway's usage events and quotas.
            return
        shadow = self.shadow
        if self.usage is None and not self._may_throttle(ticket) and shadow is None:
            return  # nothing below would record, throttle or write anything
        api_key = exchange.api_key
        api_version = exchange.api_version
        charging = ticket.charging(api_key, api_version)
        elapsed_ns = time.monotonic_ns() - exchange.received_ns
        upstream_ns = exchange.upstream_ns
        gateway_us = max(elapsed_ns - upstream_ns, 0) // 1000
        charged_upstream_us = upstream_ns // 1000 if charging.upstream_time else 0
        request_time_ns = (gateway_us + charged_upstream_us) * 1000
        facts = ticket.facts(charging, api_key, api_version, request_time_ns)
        # A request no stage admitted was left to the upstream: its arrival recorded nothing.
        # The error the quotas imposed was set when the stage cut the request.
        throttle_ms, cause, _ = decide(
            self.managers, facts, ticket.admission or NOT_ADMITTED, ticket.gateway_throttles()
        )
        # The shadow set decides before the live throttle acts, on the same facts, and
        # changes nothing the client sees (enforcement/shadow.py).
        shadow_ms = (
            shadow.observe(shadow_facts(ticket, charging, api_key, api_version, request_time_ns))
            if shadow is not None
            else None
        )
        has_response = exchange.response_frame is not None
        emptied = False
        if throttle_ms > 0 and ticket.fetch_empty is not None:
            # Spec §6.1: a throttled fetch's data is not sent (its bytes were taken back).
            empty = ticket.fetch_empty(throttle_ms)
            if isinstance(empty, bytes):  # a version kio does not model, built by hand
                exchange.replace_response_frame(empty)
            elif empty is not None:
                exchange.replace_response(empty)
            emptied = empty is not None
        if throttle_ms > 0:
            self._throttle(exchange, ticket, cause, throttle_ms)
            # Kafka's throttle clock starts when it records (docs/engine.md, "Timing against
            # Kafka's"). Produce bytes and request time are recorded as the broker answers
            # (after the append, the handling): the gateway's equivalent is the upstream's
            # answer, so the mute runs from the written response. Two clocks start at the
            # gateway's decision (ticket.now_ms on the monotonic clock) instead: a controller
            # mutation's, which the controller checks as it takes the request (the
            # upstream's time creating the admitted topics is part of the mute), and a
            # throttled fetch's, which Kafka answers, empty, as it records it, without the
            # data the gateway read upstream only to learn the size. A client waits what it
            # is told from when it hears it, so the empty answer tells what is left.
            since = 0.0
            if emptied or cause in _DECIDED_ON_ARRIVAL:
                since = exchange.received_ns / 1e9 + (ticket.now_ms - exchange.received_ms) / 1000
            written = remaining_ms(throttle_ms, since, time.monotonic()) if emptied else throttle_ms
            if has_response and api_table.has_throttle_time(api_key, api_version):
                exchange.set_throttle_time_ms(written)
            exchange.mute(throttle_ms, since)
        usage = self.usage
        if usage is not None:
            usage.add(
                ticket.usage_row(
                    exchange,
                    self.gateway_id,
                    gateway_us,
                    charged_upstream_us,
                    throttle_ms,
                    cause,
                    shadow_ms,
                )
            )

    def _may_throttle(self, ticket: QuotaTicket) -> bool:
        """Whether deciding could record or throttle: a request-time quota is configured (it
        records every request, exempt or not), a fetch quota has a fetch to record, or a quota
        charged on arrival throttled."""
        managers = self.managers
        return (
            managers.request_enabled
            or ticket.produce_ms > 0
            or ticket.topic_bytes_in_ms > 0
            or (ticket.fetch_bytes >= 0 and managers.fetch_enabled)
            or ticket.mutation_quota is not None
        )

    def _throttle(self, exchange: Exchange, ticket: QuotaTicket, cause: Cause, ms: int) -> None:
        """Record the throttle in the winning quota's throttle-time sensor only (spec §6.1):
        the tenant's when the tenant level won."""
        manager = self.managers.by_cause(cause)
        if manager is not None:
            channel = exchange.connection.connection_id
            if cause in TENANT_CAUSES:
                manager.throttle(ticket.tenant, "", channel, ms, ticket.now_ms)
            else:
                manager.throttle(ticket.user, ticket.client_id, channel, ms, ticket.now_ms)
        elif cause is Cause.TOPIC_BYTES_IN:
            self.topic_throttles += 1


class QuotaThrottleStage(Stage):
    name: ClassVar[str] = "quota-throttle"
    request_keys: ClassVar[frozenset[int] | None] = None
    response_keys: ClassVar[frozenset[int] | None] = None

    def __init__(
        self,
        ticket: Callable[[Exchange], QuotaTicket],
        connection_closed: Callable[[int], None],
        throttle: ResponseThrottle,
    ) -> None:
        """``ticket`` opens a request's ticket; ``connection_closed`` forgets a connection's."""
        self._ticket = ticket
        self._connection_closed = connection_closed
        self._throttle = throttle

    def on_request(self, exchange: Exchange) -> None:
        self._ticket(exchange)

    def on_response(self, exchange: Exchange) -> None:
        self._throttle.finish(exchange, self._ticket(exchange))

    def on_connection_closed(self, connection: ConnectionInfo) -> None:
        self._connection_closed(connection.connection_id)
