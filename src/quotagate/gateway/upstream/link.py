"""Connections to upstream brokers: one per client connection, opened with KIP-580 backoff.

:class:`UpstreamHealth` plays the part of Kafka's ``ClusterConnectionStates``: consecutive
failures are counted per upstream address and every connection to that address waits
``backoff(failures - 1)`` after the last failure, so a broker that is down is not hammered
by every client reconnecting at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol, cast

from quotagate.gateway.upstream.channel import (
    ControlChannel,
    connect_error_text,
    is_security_failure,
    open_secured,
)
from quotagate.gateway.upstream.sasl import authenticate, reauthentication_delay_s
from quotagate.gateway.upstream.security import PLAINTEXT_UPSTREAM, UpstreamSecurity
from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort
from quotagate.quota.backoff import ExponentialBackoff

log = logging.getLogger(__name__)


class UpstreamUnavailableError(Exception):
    """No upstream connection could be opened in time."""


class UpstreamHealth:
    def __init__(self, backoff: ExponentialBackoff) -> None:
        self._backoff = backoff
        self._failures: dict[HostPort, int] = {}
        self._retry_at: dict[HostPort, float] = {}

    def failures(self, address: HostPort) -> int:
        return self._failures.get(address, 0)

    def wait_s(self, address: HostPort, now: float) -> float:
        """How long to wait before the next attempt to ``address``."""
        return max(0.0, self._retry_at.get(address, 0.0) - now)

    def failed(self, address: HostPort, now: float) -> float:
        """Record a failure; returns the backoff (seconds) before the next attempt."""
        failures = self._failures.get(address, 0)
        delay = self._backoff.backoff(failures) / 1000
        self._failures[address] = failures + 1
        self._retry_at[address] = now + delay
        return delay

    def succeeded(self, address: HostPort) -> None:
        self._failures.pop(address, None)
        self._retry_at.pop(address, None)


class UpstreamOwner(Protocol):
    """What an upstream link reports to (the client connection it serves)."""

    def upstream_data(self, data: bytes) -> None: ...

    def upstream_lost(self, exc: Exception | None) -> None: ...

    def upstream_pause_writing(self) -> None: ...

    def upstream_resume_writing(self) -> None: ...

    def upstream_reauthentication_due(self) -> None:
        """The session is near its end (KIP-368): call :meth:`UpstreamLink.reauthenticate`
        once nothing forwarded is awaiting its answer."""
        ...

    def upstream_reauthenticated(self) -> None:
        """The session is renewed: the connection may forward again."""
        ...

    def upstream_reauthentication_failed(self, reason: str) -> None:
        """The upstream refused the renewal; it will close the connection anyway."""
        ...


class UpstreamLink(asyncio.Protocol):
    """The upstream half of a client connection: relays events to its owner, and owns the
    gateway's SASL session on it (KIP-368).

    When the upstream gives the session a lifetime, the link asks its owner to re-authenticate
    at 85-95 % of it, as Kafka's clients do. The owner stops forwarding and, once every
    forwarded request is answered, calls :meth:`reauthenticate`: the SASL exchange then runs
    again on the same transport, its answers read here, never reaching the owner.
    """

    __slots__ = (
        "_channel",
        "_id",
        "_loop",
        "_owner",
        "_reading_held",
        "_security",
        "_task",
        "_timeout_s",
        "_timer",
        "transport",
    )

    def __init__(
        self,
        owner: UpstreamOwner,
        security: UpstreamSecurity = PLAINTEXT_UPSTREAM,
        timeout_s: float = 10.0,
        connection_id: int = 0,
    ) -> None:
        """``timeout_s``: how long one connection attempt (TCP, TLS, SASL) or a
        re-authentication may take (``socket.connection.setup.timeout.ms``); ``connection_id``: the
        client connection's, for the log."""
        self._owner = owner
        self._id = connection_id
        self._security = security
        self._timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._channel: ControlChannel | None = None
        """Takes the upstream's bytes while the session is renewed."""
        self._reading_held = False
        self.transport: asyncio.Transport | None = None

    async def open(
        self,
        pick: AddressPicker,
        health: UpstreamHealth,
        budget_s: float,
        count_failure: Callable[[], object],
    ) -> asyncio.Transport:
        """Connect (:func:`open_upstream`), each failed attempt counted and logged, and start
        the session's clock; raises :class:`UpstreamUnavailableError` once ``budget_s`` is
        spent."""

        def failed(address: HostPort, attempt: int, delay_s: float, exc: BaseException) -> None:
            count_failure()
            log.log(
                logging.WARNING if is_security_failure(exc) else logging.INFO,
                kv(
                    "upstream_connect_failed",
                    upstream=address,
                    security=self._security.describe(),
                    attempt=attempt,
                    retry_in_ms=round(delay_s * 1000),
                    error=connect_error_text(exc),
                ),
            )

        transport, lifetime_ms = await open_upstream(
            pick, lambda: self, health, self._timeout_s, budget_s, failed, self._security
        )
        self.session_began(lifetime_ms)
        return transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        relay_buffer_limits(self.transport)

    def data_received(self, data: bytes) -> None:
        channel = self._channel
        if channel is not None:
            # Nothing else is in flight: these bytes answer the SASL exchange.
            channel.data_received(data)
            return
        self._owner.upstream_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._owner.upstream_lost(exc)

    def pause_writing(self) -> None:
        self._owner.upstream_pause_writing()

    def resume_writing(self) -> None:
        self._owner.upstream_resume_writing()

    def hold_reading(self, held: bool) -> None:
        """Stop (or restart) reading the upstream: its client is not reading its responses."""
        self._reading_held = held
        transport = self.transport
        if transport is not None:
            if held:
                transport.pause_reading()
            else:
                transport.resume_reading()

    # -- the SASL session (KIP-368) -------------------------------------------------------

    def session_began(self, lifetime_ms: int) -> None:
        """The upstream gave the session ``lifetime_ms`` (0: it does not expire)."""
        if lifetime_ms > 0:
            self._timer = self._loop.call_later(reauthentication_delay_s(lifetime_ms), self._due)

    def _due(self) -> None:
        self._timer = None
        self._owner.upstream_reauthentication_due()

    def reauthenticate(self) -> None:
        """Run the SASL exchange again; the owner forwards nothing until it hears back."""
        self._task = self._loop.create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        upstream = self.transport
        if upstream is None:
            return
        channel = self._channel = ControlChannel.borrow(upstream)
        started = self._loop.time()
        # A client slow to read its responses keeps the upstream paused; the SASL answers
        # are the gateway's own and small: read them anyway.
        upstream.resume_reading()
        try:
            lifetime_ms = await authenticate(channel, self._security, self._timeout_s)
        except (OSError, TimeoutError) as exc:
            self._owner.upstream_reauthentication_failed(connect_error_text(exc))
            return
        finally:
            self._channel = None
            if self._reading_held and self.transport is not None:
                self.transport.pause_reading()
        log.info(
            kv(
                "upstream_reauthenticated",
                id=self._id,
                security=self._security.describe(),
                took_ms=round((self._loop.time() - started) * 1000),
                session_lifetime_ms=lifetime_ms,
            )
        )
        self.session_began(lifetime_ms)
        self._owner.upstream_reauthenticated()

    def close(self) -> None:
        """Close the upstream connection and forget the session."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self.transport is not None:
            self.transport.close()


# A produce request or fetch response is often a megabyte or more; with asyncio's default
# 64 KiB high-water mark every such frame would stop and restart the relay several times.
WRITE_BUFFER_HIGH = 4 * 1024 * 1024
WRITE_BUFFER_LOW = 1024 * 1024


def relay_buffer_limits(transport: asyncio.Transport) -> None:
    """Let a relaying transport buffer a few large frames before pushing back."""
    transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH, low=WRITE_BUFFER_LOW)


AddressPicker = Callable[[int], HostPort | None]
"""``attempt -> address`` to try, None when no address is known."""


async def open_upstream(
    pick: AddressPicker,
    factory: Callable[[], asyncio.Protocol],
    health: UpstreamHealth,
    setup_timeout_s: float,
    budget_s: float,
    on_failure: Callable[[HostPort, int, float, BaseException], None],
    security: UpstreamSecurity = PLAINTEXT_UPSTREAM,
) -> tuple[asyncio.Transport, int]:
    """Connect, retrying with backoff until ``budget_s`` has passed; the transport, and the SASL
    session lifetime the upstream gave in ms (KIP-368; 0 without SASL or when unlimited).

    A TLS or SASL failure or a timeout is retried with backoff and reported through
    ``on_failure`` every time, never retried without TLS. A refused connection is not retried
    to the same address: the broker is down, and a client held here for the whole budget
    would take the gateway's port for a live broker instead of backing off and asking for
    new leaders, as it does when Kafka's own broker refuses it. Once every address the picker
    offers has refused, this gives up (the backoff still applies to the next connection).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s
    attempt = 0
    refused: set[HostPort] = set()
    while True:
        address = pick(attempt)
        if address is None:
            raise UpstreamUnavailableError("no upstream address known for this broker")
        if address in refused:
            raise UpstreamUnavailableError(f"{address} refused the connection")
        now = loop.time()
        wait = health.wait_s(address, now)
        if now + wait > deadline:
            raise UpstreamUnavailableError(
                f"{address} unreachable after {attempt} attempt(s) "
                f"({health.failures(address)} consecutive failures)"
            )
        if wait > 0:
            await asyncio.sleep(wait)
        timeout = max(0.001, min(setup_timeout_s, deadline - loop.time()))
        try:
            channel = await open_secured(address, security, timeout)
            transport = channel.hand_over(factory())
        except (OSError, TimeoutError) as exc:
            delay = health.failed(address, loop.time())
            attempt += 1
            on_failure(address, attempt, delay, exc)
            if isinstance(exc, ConnectionRefusedError):
                refused.add(address)
            continue
        health.succeeded(address)
        return transport, channel.session_lifetime_ms
