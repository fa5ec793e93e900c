"""Ports the workers of one instance share.

Every worker binds every listener and broker port with SO_REUSEPORT and the kernel spreads
new connections over them. A listener configured on port 0 is given one concrete port first:
the supervisor binds it (SO_REUSEPORT, never listening, so it receives no connection) and
holds it for the instance's lifetime, so a restarted worker finds the same port.
"""

from __future__ import annotations

import dataclasses
import socket

from quotagate.gateway import GatewayConfig
from quotagate.protocol.host_port import HostPort


def hold_listen_ports(config: GatewayConfig) -> tuple[GatewayConfig, list[socket.socket]]:
    """``config`` with every port-0 listener on a concrete port, and the sockets holding them."""
    held: list[socket.socket] = []
    listeners = []
    for configured in config.listeners:
        listener = configured
        if listener.listen.port == 0:
            family = socket.AF_INET6 if ":" in listener.listen.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((listener.listen.host, 0))
            held.append(sock)
            port = int(sock.getsockname()[1])
            listener = dataclasses.replace(listener, listen=HostPort(listener.listen.host, port))
        listeners.append(listener)
    return dataclasses.replace(config, listeners=tuple(listeners)), held
