"""One-listener loopback gateway configs in front of a tansu broker or a Kafka cluster."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Sequence
from typing import Any, Final

from quotagate.gateway.config import GatewayConfig, ListenerConfig, validate
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.protocol.host_port import HostPort
from support.upstreams import Upstream

TANSU_NODE_ID: Final = 111  # tansu always runs as node 111


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that were all free a moment ago."""
    while True:
        start = free_port()
        if start + count <= 65536 and _all_free(range(start, start + count)):
            return start


def _all_free(ports: range) -> bool:
    with contextlib.ExitStack() as held:
        for port in ports:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                return False
    return True


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
    first, last = min(node_ids), max(node_ids)
    listener_config = ListenerConfig(
        name=security_protocol,
        listen=HostPort(LOOPBACK, free_port()),
        security_protocol=security_protocol,
        broker_port_start=free_ports(last - first + 1),
        broker_node_id_start=first,
        broker_port_count=last - first + 1,
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
