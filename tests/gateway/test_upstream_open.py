"""Opening a client connection's upstream half: a refused broker gives up at once (the client
backs off and asks for new leaders, as with Kafka's own broker down), another address is
tried first, and the backoff carries over to the next connection. Real sockets on loopback.
(Timeouts and TLS failures are retried until the budget: tests/gateway/test_upstream_tls.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.gateway.upstream.link import UpstreamHealth, UpstreamUnavailableError, open_upstream
from quotagate.protocol.host_port import HostPort
from quotagate.quota.backoff import ExponentialBackoff

BUDGET_S = 30.0  # far above what any case here may take: giving up is by refusal, not time


@pytest.fixture
async def live() -> AsyncIterator[HostPort]:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, LOOPBACK, 0)
    async with server:
        yield HostPort(LOOPBACK, server.sockets[0].getsockname()[1])


def _health() -> UpstreamHealth:
    return UpstreamHealth(ExponentialBackoff(50, 2, 1000, 0.2))


async def _open(
    addresses: list[HostPort], health: UpstreamHealth
) -> tuple[list[HostPort], asyncio.Transport | None]:
    """Tried addresses in order, and the transport when one took the connection."""
    tried: list[HostPort] = []
    try:
        transport, _ = await open_upstream(
            lambda attempt: addresses[attempt % len(addresses)],
            asyncio.Protocol,
            health,
            5.0,
            BUDGET_S,
            lambda address, _attempt, _delay, _exc: tried.append(address),
        )
    except UpstreamUnavailableError:
        return tried, None
    return tried, transport


async def test_a_refused_broker_is_given_up_after_one_attempt() -> None:
    dead = HostPort(LOOPBACK, free_port())
    health = _health()
    tried, transport = await _open([dead], health)
    assert (tried, transport) == ([dead], None)
    # The next connection to it waits out the backoff first: one attempt again.
    tried, transport = await _open([dead], health)
    assert (tried, transport) == ([dead], None)
    assert health.failures(dead) == 2


async def test_another_address_is_tried_before_giving_up(live: HostPort) -> None:
    dead = HostPort(LOOPBACK, free_port())
    tried, transport = await _open([dead, live], _health())
    assert tried == [dead]  # failures only: the live one took it
    assert transport is not None
    transport.close()


async def test_every_address_refused_gives_up_after_one_round() -> None:
    dead = [HostPort(LOOPBACK, free_port()) for _ in range(3)]
    tried, transport = await _open(dead, _health())
    assert (tried, transport) == (dead, None)
