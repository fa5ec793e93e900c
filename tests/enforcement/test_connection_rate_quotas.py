"""``connection_creation_rate`` of ip entities (KIP-612), set with AlterClientQuotas and enforced
by the gateway's acceptor: a reconnect storm of one address is held to its rate while other
addresses, and real clients, connect normally. Other hosts are other loopback addresses."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.sync import SyncAdminClient
from support.loopback import answered, answered_async, api_versions, connect_from

pytestmark = pytest.mark.integration

# Two 1 s samples: Kafka's default of 11 lets a fresh rate take ten seconds' worth of
# connections at once (the first-window padding), which would swamp a few seconds' storm.
QUOTAS = {"super.users": ["User:ANONYMOUS"], "quota.window.num": 2}
STORM = "127.0.0.2"
RATE = 20


async def _storm(
    host: str, port: int, per_s: int, seconds: float
) -> list[tuple[float, float, bool]]:
    """Connection attempts from STORM at ``per_s``, each waiting up to 3 s for its ApiVersions
    answer; for each, seconds from the storm's start to the outcome, how long the attempt
    took, and whether it was answered."""
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def attempt() -> tuple[float, float, bool]:
        began = loop.time()
        ok = await answered_async(STORM, host, port, timeout_s=3.0)
        return loop.time() - start, loop.time() - began, ok

    tasks = []
    for i in range(int(per_s * seconds)):
        delay = start + i / per_s - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(attempt()))
    return list(await asyncio.gather(*tasks))


def _others_connect(host: str, port: int, bootstrap: str) -> list[float]:
    """What other hosts see during the storm: seconds each connection took to be answered."""
    latencies = []
    for _ in range(5):
        started = time.monotonic()
        assert answered("127.0.0.3", host, port, timeout_s=10)
        latencies.append(time.monotonic() - started)
        time.sleep(0.3)
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.list_topics(timeout=10).brokers
    latencies.append(time.monotonic() - started)
    return latencies


def test_reconnect_storm_is_held_to_the_ip_rate_while_others_connect(
    quota_tansu: Any, start_quota_gateway: Any
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=QUOTAS)
    host, port = gateway.host_port
    with SyncAdminClient(gateway.bootstrap) as admin:
        admin.alter_client_quotas(
            [ClientQuotaAlteration.of({"ip": STORM}, {"connection_creation_rate": RATE})]
        ).raise_on_error()
    seconds = 4.0
    with ThreadPoolExecutor(1) as pool:
        others = pool.submit(_others_connect, host, port, gateway.bootstrap)
        outcomes = asyncio.run(_storm(host, port, per_s=250, seconds=seconds))
        latencies = others.result(60)
    answered_at = [at for at, _took, ok in outcomes if ok]
    held_for = [took for _at, took, ok in outcomes if not ok]
    # Hundreds of attempts a second; about RATE a second of them get in. The first second
    # also takes the fresh window's RATE, so the rate is measured after it.
    assert len(outcomes) == 1000
    steady = [at for at in answered_at if 1.0 <= at < seconds]
    assert len(steady) / (seconds - 1.0) == pytest.approx(RATE, rel=0.25)
    assert len(answered_at) <= RATE * (seconds + 1) * 1.25
    # Over-rate connections are held unanswered for their throttle time, (O - T) / T of the
    # window and at most one quota window (1 s), then closed: none is left open.
    assert 0.1 < max(held_for) < 1.5
    registry = gateway.background.gateway.metrics.registry
    throttled = registry.get_sample_value(
        "quotagate_connections_throttled_total", {"listener": "PLAINTEXT", "ip": STORM}
    )
    assert throttled == len(held_for)
    # Other hosts connected as usual meanwhile: answered promptly, the real client included.
    assert max(latencies[:-1]) < 1.0, latencies
    assert latencies[-1] < 5.0, latencies
    gateway.stop()


def test_default_ip_rate_applies_where_no_address_has_its_own_and_can_be_removed(
    quota_tansu: Any, start_quota_gateway: Any
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=QUOTAS)
    host, port = gateway.host_port
    default = {"ip": None}
    with SyncAdminClient(gateway.bootstrap) as admin:
        admin.alter_client_quotas(
            [
                ClientQuotaAlteration.of(default, {"connection_creation_rate": 5}),
                # The address this test's admin client uses keeps a rate of its own.
                ClientQuotaAlteration.of({"ip": "127.0.0.1"}, {"connection_creation_rate": 1000}),
            ]
        ).raise_on_error()
        described = admin.describe_client_quotas()
        assert described[ClientQuotaEntity.of(default)] == {"connection_creation_rate": 5.0}
    burst = asyncio.run(_burst("127.0.0.5", host, port, 20))
    assert 0 < sum(burst) < 20
    registry = gateway.background.gateway.metrics.registry
    labels = {"listener": "PLAINTEXT", "ip": "<default>"}
    assert registry.get_sample_value("quotagate_connections_throttled_total", labels)
    with SyncAdminClient(gateway.bootstrap) as admin:
        admin.alter_client_quotas(
            [ClientQuotaAlteration.of(default, {"connection_creation_rate": None})]
        ).raise_on_error()
    assert all(asyncio.run(_burst("127.0.0.6", host, port, 20)))
    gateway.stop()


async def _burst(source: str, host: str, port: int, count: int) -> list[bool]:
    return list(
        await asyncio.gather(
            *(answered_async(source, host, port, timeout_s=3.0) for _ in range(count))
        )
    )


def test_connection_rate_per_ip_holds_then_closes(
    quota_tansu: Any, start_quota_gateway: Any, wait_for: Any
) -> None:
    """Kafka's SocketServerTest.testConnectionRatePerIp: default ip rate 5 over 2 samples;
    of six connections five are accepted and one is held, a seventh is held too, both are
    closed when their throttle ends, and once the samples have expired a new one gets in."""
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=QUOTAS)
    host, port = gateway.host_port
    with SyncAdminClient(gateway.bootstrap) as admin:
        admin.alter_client_quotas(
            [ClientQuotaAlteration.of({"ip": None}, {"connection_creation_rate": 5})]
        ).raise_on_error()
    registry = gateway.background.gateway.metrics.registry
    labels = {"listener": "PLAINTEXT", "ip": "<default>"}

    def throttled() -> float:
        return registry.get_sample_value("quotagate_connections_throttled_total", labels) or 0

    socks = [connect_from("127.0.0.7", host, port) for _ in range(6)]
    wait_for(lambda: throttled() == 1, 10, "one connection held")
    seventh = connect_from("127.0.0.7", host, port)
    wait_for(lambda: throttled() == 2, 10, "two connections held")
    # The held ones are closed unanswered within a quota window; the five are answered.
    outcomes = [api_versions(sock) for sock in [*socks, seventh]]
    assert sorted(outcomes) == [False, False, True, True, True, True, True]
    time.sleep(2.1)  # two 1 s samples: the earlier connections leave the rate
    assert answered("127.0.0.7", host, port)
    for sock in [*socks, seventh]:
        sock.close()
    gateway.stop()
