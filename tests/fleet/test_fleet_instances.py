"""Two gateway instances in front of one cluster hold one client to one quota.

One client id offers twice its quota over four connections, two through each instance. With
the usage exchange on, the two together hold it to the quota, as one instance holds it when
all four connections go through it; with the exchange off, each instance enforces the whole
quota on its own and the client gets twice as much: the same test, able to fail.
Windows are 2 x 1 s, as in tests/enforcement/test_byte_rates.py (why: its docstring).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.config import GatewayConfig, ListenerConfig, validate
from quotagate.gateway.embedded import LOOPBACK, TansuBroker, free_port
from quotagate.protocol import api_keys
from quotagate.protocol.host_port import HostPort
from quotagate.store.quotas import Change

pytestmark = pytest.mark.integration

TANSU_NODE_ID = 111
QUOTA = 300_000  # bytes per second, for the client id, fleet-wide
WARM_UP_S = 5.0
MEASURE_S = 20.0
VALUE = b"f" * 1000
CONNECTIONS = 4
OFFERED = 2.0  # the client offers twice its quota
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


@pytest.fixture(scope="module")
def fleet_tansu() -> Any:
    with TansuBroker() as broker:
        yield broker


def _instance(upstream: str, tmp: Path, name: str, fleet: dict[str, Any]) -> BackgroundGateway:
    host, _, port = upstream.rpartition(":")
    config = validate(
        GatewayConfig(
            gateway_id=name,
            listeners=(
                ListenerConfig(
                    name="PLAINTEXT",
                    listen=HostPort(LOOPBACK, free_port()),
                    broker_port_start=free_port(),
                    broker_node_id_start=TANSU_NODE_ID,
                    broker_port_count=1,
                ),
            ),
            bootstrap_servers=(HostPort(host, int(port)),),
            store_path=str(tmp / f"{name}.db"),
            extra={"quotas": WINDOWS, "usage": {"path": str(tmp / "usage")}, "fleet": fleet},
        )
    )
    runtime = QuotaRuntime.from_config(config)
    runtime.alter_client_quotas(
        [Change({"client-id": "spread"}, "producer_byte_rate", float(QUOTA))], "test", "test"
    )
    gateway = BackgroundGateway(config, plugins=[QuotaEnforcement(runtime)])
    gateway.start()
    return gateway


def _paced(bootstrap: str, topic: str, rate: float, stop_at: float, errors: list[str]) -> None:
    """Offer ``rate`` bytes/s; what a throttled client cannot hand over is lost, not queued,
    so the offered load stays what it says (a greedy backlog would arrive in bursts)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "spread",
            "linger.ms": 5,
            "queue.buffering.max.messages": 32,
        }
    )

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    started, offered = time.time(), 0
    while time.time() < stop_at:
        while offered < (time.time() - started) * rate:
            with contextlib.suppress(BufferError):
                producer.produce(topic, VALUE, on_delivery=delivered)
            offered += len(VALUE)
        producer.poll(0.005)
    producer.flush(60)


def _achieved(usage: Path, start: float) -> float:
    rows = ds.dataset(usage, format="parquet", partitioning="hive").to_table().to_pylist()
    wire = [
        r["request_bytes"]
        for r in rows
        if r["client_id"] == "spread"
        and r["api_key"] == api_keys.PRODUCE
        and start <= r["ts_ms"] / 1000 < start + MEASURE_S
    ]
    return sum(wire) / MEASURE_S


def _run(upstream: str, tmp: Path, instances: int, exchange: bool) -> float:
    """Achieved ÷ quota of one client over CONNECTIONS connections spread over ``instances``."""
    fleet = {"id": f"f-{uuid.uuid4().hex[:6]}", "exchange.enabled": exchange}
    gateways = [_instance(upstream, tmp, f"gw-{i}", fleet) for i in range(instances)]
    try:
        topic = f"spread-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": str(gateways[0].bootstrap)})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(30)
        start = time.time()
        stop_at = start + WARM_UP_S + MEASURE_S + 1
        errors: list[str] = []
        threads = [
            threading.Thread(
                target=_paced,
                args=(
                    str(gateways[i % instances].bootstrap),
                    topic,
                    OFFERED * QUOTA / CONNECTIONS,
                    stop_at,
                    errors,
                ),
            )
            for i in range(CONNECTIONS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert errors == []
    finally:
        for gateway in gateways:
            gateway.stop()
    return _achieved(tmp / "usage", start + WARM_UP_S) / QUOTA


def test_two_instances_hold_one_client_to_one_quota(
    fleet_tansu: TansuBroker, tmp_path: Path
) -> None:
    runs = {"single": (1, True), "fleet": (2, True), "no exchange": (2, False)}
    results: dict[str, float] = {}

    def run(name: str) -> None:
        instances, exchange = runs[name]
        results[name] = _run(
            fleet_tansu.bootstrap, tmp_path / name.replace(" ", "-"), instances, exchange
        )

    threads = [threading.Thread(target=run, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert 0.95 <= results["fleet"] <= 1.05, results
    assert abs(results["fleet"] - results["single"]) <= 0.03, results
    assert results["no exchange"] >= 1.8, results
