"""One-listener loopback gateway configs in front of a tansu broker, for every test kind."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from quotagate.gateway.config import GatewayConfig, ListenerConfig, validate
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.protocol.host_port import HostPort

TANSU_NODE_ID: Final = 111  # tansu always runs as node 111


def gateway_config(
    upstream: str,
    *,
    security_protocol: str = "PLAINTEXT",
    listener: dict[str, Any] | None = None,
    **fields: Any,
) -> GatewayConfig:
    """A one-listener loopback gateway config in front of ``upstream`` (HOST:PORT)."""
    host, _, port = upstream.rpartition(":")
    listener_config = ListenerConfig(
        name=security_protocol,
        listen=HostPort(LOOPBACK, free_port()),
        security_protocol=security_protocol,
        broker_port_start=free_port(),
        broker_node_id_start=TANSU_NODE_ID,
        broker_port_count=1,
    )
    if listener:
        listener_config = dataclasses.replace(listener_config, **listener)
    return validate(
        GatewayConfig(
            listeners=(listener_config,),
            bootstrap_servers=(HostPort(host, int(port)),),
            **fields,
        )
    )
