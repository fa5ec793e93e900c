"""A fleet whose usage exchange stalls and flaps holds one client over 20 connections as one
process does (plus a tenth at most): two ``quotagate serve --workers 2`` instances of one
fleet in front of a proxy that pauses the fleet's own connections to the upstream and nothing
else. Each instance's workers still hear each other through its hub; the other instance's
usage is what the stall hides, and the fallback must stand in for it.

One process first, then the fleet, whose exchange is stalled for 3 s, then made to flap (1 s
stalled, 1 s open) for the rest of the measure.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotagate.gateway.embedded import TansuBroker, free_port
from support.exchange_proxy import ExchangeProxy
from support.fleet_load import offer, wire_rate
from support.instances import Instance

pytestmark = pytest.mark.integration

QUOTA = 1_000_000.0
CONNECTIONS = 20
VALUE = b"x" * 4096
WARM_UP_S = 5.0
MEASURE_S = 12.0  # the 3 s stall, then four flaps of 1 s stalled, 1 s open


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[TansuBroker, ExchangeProxy]]:
    proxy_port = free_port()
    broker = TansuBroker(advertised=f"127.0.0.1:{proxy_port}")
    with broker, ExchangeProxy(broker.port, proxy_port) as proxy:
        yield broker, proxy


def _faults(proxy: ExchangeProxy, start: float, stop: threading.Event) -> None:
    """Stall 3 s once the measure begins, then flap 1 s / 1 s until the end."""
    time.sleep(max(start + WARM_UP_S - time.time(), 0))
    proxy.pause()
    if stop.wait(3.0):
        return
    paused = False
    while not stop.wait(1.0):
        paused = not paused
        (proxy.resume if not paused else proxy.pause)()
    proxy.resume()


def _achieved(tmp: Path, proxy: ExchangeProxy, instances: int, faulty: bool) -> tuple[float, str]:
    """Achieved ÷ quota of the client spread evenly over ``instances`` (2 workers each when
    more than one), and what they logged."""
    fleet_id, store_topic = f"f-{uuid.uuid4().hex[:6]}", f"_quotagate.t-{uuid.uuid4().hex[:6]}"
    workers = 2 if instances > 1 else 1
    gateways = [
        Instance(tmp / str(i), proxy.address, workers, True, QUOTA, store_topic, fleet_id=fleet_id)
        for i in range(instances)
    ]
    stop = threading.Event()
    faults = threading.Thread(target=_faults, args=(proxy, time.time(), stop), daemon=True)
    if faulty:
        faults.start()
    try:
        start = offer(
            [gateways[i % instances].bootstrap for i in range(CONNECTIONS)],
            2 * QUOTA,
            WARM_UP_S + MEASURE_S + 1,
            VALUE,
            buffer_kbytes=64,
        )
    finally:
        stop.set()
        if faulty:
            faults.join()
        proxy.resume()
        for gateway in gateways:
            gateway.stop()
    wire = sum(wire_rate(g.usage, start + WARM_UP_S, MEASURE_S) for g in gateways)
    return wire / QUOTA, "".join(line for g in gateways for line in g.lines)


def test_a_stalled_and_flapping_exchange_never_opens_the_quota(
    proxied: tuple[TansuBroker, ExchangeProxy], tmp_path: Path
) -> None:
    _broker, proxy = proxied
    one, _ = _achieved(tmp_path / "one", proxy, 1, faulty=False)
    fleet, log = _achieved(tmp_path / "fleet", proxy, 2, faulty=True)
    print(f"one process {one:.3f}, fleet with a stalled and flapping exchange {fleet:.3f}")
    # The faults were real: the fleet's connections went through the proxy and the workers
    # lost their exchange (so the test can fail), and fell back rather than forgot.
    assert proxy.fleet_connections > 0
    assert "event=fleet_exchange_lost" in log, log[-3000:]
    assert "event=fleet_peer_silent" in log
    assert "event=fleet_peer_forgotten" not in log
    assert 0.8 <= one <= 1.4, one
    assert fleet <= 1.1 * one, (fleet, one)
