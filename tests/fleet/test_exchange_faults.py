"""A fleet whose usage exchange stalls and flaps holds one client over 20 connections as one
process does (plus a tenth at most): ``quotagate serve --workers 4`` in front of a proxy that
pauses the fleet's own connections to the upstream and nothing else.

One process first (its figure is what Kafka's arithmetic gives with 20 connections muted one
by one: more than the quota), then the fleet, whose exchange is stalled for 3 s, then made to
flap (1 s stalled, 1 s open) for the rest of the measure.
"""

from __future__ import annotations

import threading
import time
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
MEASURE_S = 24.0


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


def _achieved(
    tmp: Path, proxy: ExchangeProxy, workers: int, faulty: bool
) -> tuple[float, Instance]:
    instance = Instance(tmp, proxy.address, workers, True, QUOTA)
    stop = threading.Event()
    started = time.time()
    faults = threading.Thread(target=_faults, args=(proxy, started, stop), daemon=True)
    if faulty:
        faults.start()
    try:
        start = offer(
            [instance.bootstrap] * CONNECTIONS,
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
        instance.stop()
    return wire_rate(instance.usage, start + WARM_UP_S, MEASURE_S) / QUOTA, instance


def test_a_stalled_and_flapping_exchange_never_opens_the_quota(
    proxied: tuple[TansuBroker, ExchangeProxy], tmp_path: Path
) -> None:
    _broker, proxy = proxied
    one, _ = _achieved(tmp_path / "one", proxy, 1, faulty=False)
    fleet, instance = _achieved(tmp_path / "fleet", proxy, 4, faulty=True)
    log = "".join(instance.lines)
    # The faults were real: the fleet's connections went through the proxy and the workers
    # lost their exchange (so the test can fail), and fell back rather than forgot.
    assert proxy.fleet_connections > 0
    assert "event=fleet_exchange_lost" in log, log[-3000:]
    assert "event=fleet_peer_forgotten" not in log
    print(f"one process {one:.3f}, fleet with a stalled and flapping exchange {fleet:.3f}")
    assert 0.8 <= one <= 1.4, one
    assert fleet <= 1.1 * one, (fleet, one)
