"""Connections to upstream brokers: one per client connection, opened with KIP-580 backoff.

:class:`UpstreamHealth` plays the part of Kafka's ``ClusterConnectionStates``: consecutive
failures are counted per upstream address and every connection to that address waits
``backoff(failures - 1)`` after the last failure, so a broker that is down is not hammered
by every client reconnecting at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from quotagate.gateway.control import ControlChannel
from quotagate.gateway.upstream_security import PLAINTEXT_UPSTREAM, UpstreamSecurity
from quotagate.protocol.host_port import HostPort
from quotagate.quota.backoff import ExponentialBackoff


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


class UpstreamLink(asyncio.Protocol):
    """The upstream half of a client connection: relays events to its owner."""

    __slots__ = ("_owner", "transport")

    def __init__(self, owner: UpstreamOwner) -> None:
        self._owner = owner
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        relay_buffer_limits(self.transport)

    def data_received(self, data: bytes) -> None:
        self._owner.upstream_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._owner.upstream_lost(exc)

    def pause_writing(self) -> None:
        self._owner.upstream_pause_writing()

    def resume_writing(self) -> None:
        self._owner.upstream_resume_writing()


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

    A TLS or SASL failure counts as a failed attempt like a refused connection: it is retried
    with backoff and reported through ``on_failure`` every time, never retried without TLS.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s
    attempt = 0
    while True:
        address = pick(attempt)
        if address is None:
            raise UpstreamUnavailableError("no upstream address known for this broker")
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
            if not (security.uses_tls or security.uses_sasl):
                transport, _ = await asyncio.wait_for(
                    loop.create_connection(factory, address.host, address.port), timeout
                )
                lifetime_ms = 0
            else:
                channel = await ControlChannel.open(address, timeout, security)
                transport = channel.hand_over(factory())
                lifetime_ms = channel.session_lifetime_ms
        except (OSError, TimeoutError) as exc:
            delay = health.failed(address, loop.time())
            attempt += 1
            on_failure(address, attempt, delay, exc)
            continue
        health.succeeded(address)
        return transport, lifetime_ms
