"""One-listener loopback gateway configs in front of a tansu broker or a Kafka cluster."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime
from quotagate.gateway.config import GatewayConfig, ListenerConfig, validate
from quotagate.gateway.embedded import LOOPBACK, free_port, free_ports
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol.host_port import HostPort
from quotagate.store.quotas import Change
from support.upstreams import Upstream

TANSU_NODE_ID: Final = 111  # tansu always runs as node 111


def gateway_config(
    upstream: str | Upstream,
    *,
    security_protocol: str = "PLAINTEXT",
    listener: dict[str, Any] | None = None,
    node_ids: Sequence[int] = (TANSU_NODE_ID,),
    **fields: Any,
) -> GatewayConfig:
    """A one-listener loopback gateway config in front of ``upstream`` (an ``Upstream``, or
    HOST:PORT[,HOST:PORT...] of brokers ``node_ids``), one gateway port for each broker."""
    if isinstance(upstream, Upstream):
        upstream, node_ids = upstream.bootstrap, upstream.node_ids
    first, count = min(node_ids), max(node_ids) - min(node_ids) + 1
    start = free_ports(count)
    listen = free_port()  # never one of those: a process hands out each port once
    listener_config = ListenerConfig(
        name=security_protocol,
        listen=HostPort(LOOPBACK, listen),
        security_protocol=security_protocol,
        broker_port_start=start,
        broker_node_id_start=first,
        broker_port_count=count,
    )
    if listener:
        listener_config = dataclasses.replace(listener_config, **listener)
    return validate(
        GatewayConfig(
            listeners=(listener_config,),
            bootstrap_servers=tuple(HostPort.parse(a) for a in upstream.split(",")),
            **fields,
        )
    )


@dataclasses.dataclass(frozen=True)
class LiveGateway:
    """A running gateway with the quota plugin, and the runtime its tests read and alter."""

    background: BackgroundGateway
    runtime: QuotaRuntime
    config: GatewayConfig

    @property
    def bootstrap(self) -> str:
        return str(self.background.bootstrap)

    def broker_ports(self, node_ids: Iterable[int]) -> dict[int, int]:
        """The port the first listener serves each of ``node_ids`` on."""
        listener = self.config.listeners[0]
        ports = {node_id: listener.port_for_node(node_id) for node_id in node_ids}
        return {node_id: port for node_id, port in ports.items() if port}

    def series(self, name: str, client_id: str) -> float:
        """``client_id``'s value of the runtime's metric series ``name`` (0 when it has none)."""
        for labels, value in self.runtime.snapshot["series"].get(name, []):
            if labels[1] == client_id:
                return float(value)
        return 0.0


@contextlib.contextmanager
def quota_gateway(config: GatewayConfig, quotas: Sequence[Change] = ()) -> Iterator[LiveGateway]:
    """A gateway running ``config`` with the quota plugin and ``quotas`` set, stopped when the
    block ends (for module-scoped fixtures; tests/enforcement has a per-test factory)."""
    runtime = QuotaRuntime.from_config(config)
    if quotas:
        runtime.store_sync.alter_client_quotas(list(quotas), "test", "test")
    gateway = BackgroundGateway(config, plugins=[QuotaEnforcement(runtime)])
    gateway.start()
    try:
        yield LiveGateway(gateway, runtime, config)
    finally:
        gateway.stop()
