"""One client id spread over the instances of a fleet: how much of its quota it achieves.

Shared by tests/fleet and benchmarks/fleet_overshoot.py. Instances are in-process gateways
(each its own event loop thread, store and usage writer) in front of one upstream; the
client is ``connections`` confluent-kafka producers with one client id, each offering an
equal part of ``offered`` x the quota. The achieved rate is read from the usage events of
every instance (request bytes, the unit the quota counts).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol import api_keys
from quotagate.store.quotas import Change
from support.gateways import gateway_config
from support.upstreams import Upstream

CLIENT_ID = "spread"
VALUE = b"f" * 1000
# Kafka's default 11 x 1 s lets a throttled client's rate swing by tens of percent over
# 20 s (tests/enforcement/test_byte_rates.py says why); 2 x 1 s makes 20 s measurable.
SHORT_WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


@dataclass(frozen=True)
class FleetRun:
    instances: int = 2
    exchange: bool = True
    interval_ms: int = 100
    connections: int = 4
    placement: tuple[int, ...] = ()
    """Instance of each connection (default: round robin)."""
    quota: float = 300_000.0
    offered: float = 2.0
    warm_up_s: float = 5.0
    measure_s: float = 20.0
    windows: dict[str, int] = field(default_factory=lambda: dict(SHORT_WINDOWS))
    usage_trim: str = "roll"
    """``[fleet] usage.trim``: a usage topic per period, or one trimmed (Kafka only)."""

    def achieved(self, upstream: str | Upstream, tmp: Path) -> float:
        """Achieved ÷ quota over the measure, after the warm-up."""
        fleet = {
            "id": f"f-{uuid.uuid4().hex[:6]}",
            "exchange.enabled": self.exchange,
            "exchange.interval.ms": self.interval_ms,
            "usage.trim": self.usage_trim,
        }
        gateways = [self._instance(upstream, tmp, f"gw-{i}", fleet) for i in range(self.instances)]
        placement = self.placement or tuple(i % self.instances for i in range(self.connections))
        try:
            start = offer(
                [str(gateways[i].bootstrap) for i in placement],
                self.offered * self.quota,
                self.warm_up_s + self.measure_s + 1,
            )
        finally:
            for gateway in gateways:
                gateway.stop()
        return wire_rate(tmp / "usage", start + self.warm_up_s, self.measure_s) / self.quota

    def _instance(
        self, upstream: str | Upstream, tmp: Path, name: str, fleet: dict[str, Any]
    ) -> BackgroundGateway:
        config = gateway_config(
            upstream,
            gateway_id=name,
            store_path=str(tmp / f"{name}.db"),
            extra={"quotas": self.windows, "usage": {"path": str(tmp / "usage")}, "fleet": fleet},
        )
        runtime = QuotaRuntime.from_config(config)
        runtime.store_sync.alter_client_quotas(
            [Change({"client-id": CLIENT_ID}, "producer_byte_rate", self.quota)], "test", "test"
        )
        gateway = BackgroundGateway(config, plugins=[QuotaEnforcement(runtime)])
        gateway.start()
        return gateway


def offer(
    bootstraps: list[str],
    rate: float,
    seconds: float,
    value: bytes = VALUE,
    buffer_kbytes: int = 32,
    client_id: str = CLIENT_ID,
    client_ids: list[str] | None = None,
) -> float:
    """One producer of ``client_id`` per bootstrap address, together offering ``rate``
    bytes/s of ``value`` records for ``seconds``, each buffering at most ``buffer_kbytes``;
    returns the start time (epoch seconds). ``client_ids``: one per address instead (the
    members of a tenant)."""
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstraps[0]})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    start = time.time()
    errors: list[str] = []
    threads = [
        threading.Thread(
            target=_paced,
            args=(bootstrap, topic, rate / len(bootstraps), start + seconds, value, errors),
            kwargs={"buffer_kbytes": buffer_kbytes, "client_id": who},
        )
        for bootstrap, who in zip(
            bootstraps, client_ids or [client_id] * len(bootstraps), strict=True
        )
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)
    if errors:
        raise AssertionError(f"delivery failures: {errors[:3]}")
    return start


def usage_rows(usage: Path) -> list[dict[str, Any]]:
    table = ds.dataset(usage, format="parquet", partitioning="hive").to_table()
    return list(table.to_pylist())


def wire_rate(usage: Path, start: float, seconds: float) -> float:
    """Produce request bytes per second of ``CLIENT_ID`` in ``[start, start + seconds)``,
    from the usage events of every gateway writing under ``usage``."""
    end = start + seconds
    wire = sum(
        r["request_bytes"]
        for r in usage_rows(usage)
        if r["client_id"] == CLIENT_ID
        and r["api_key"] == api_keys.PRODUCE
        and start <= r["ts_ms"] / 1000 < end
    )
    return wire / seconds


def _paced(
    bootstrap: str,
    topic: str,
    rate: float,
    stop_at: float,
    value: bytes,
    errors: list[str],
    *,
    buffer_kbytes: int,
    client_id: str,
) -> None:
    """Offer ``rate`` bytes/s; what a throttled client cannot hand over is lost, not queued,
    so the offered load stays what it says (a greedy backlog would arrive in bursts)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            # A bounded local buffer in bytes as well as in records: what a connection sends
            # right after a mute is then alike for small and large records. A quarter of a MB
            # per connection per unmute arrives as one burst, and spread over workers it is
            # admitted before peers hear of it.
            "queue.buffering.max.messages": 32,
            "queue.buffering.max.kbytes": buffer_kbytes,
        }
    )

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    started, offered = time.time(), 0
    while time.time() < stop_at:
        while offered < (time.time() - started) * rate:
            with contextlib.suppress(BufferError):
                producer.produce(topic, value, on_delivery=delivered)
            offered += len(value)
        producer.poll(0.005)
    producer.flush(60)
