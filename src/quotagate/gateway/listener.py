"""One configured listener: a bootstrap port plus one port per upstream broker.

Port-per-broker (as in Kroxylicious): upstream node ``n`` is reached through
``broker.port.start + (n - broker.node.id.start)``. A broker port is opened the first time
a response names that node, before the response reaches the client, so the address a
client learns is always already accepting connections.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from quotagate.gateway.auth.authenticator import SecurityProtocol
from quotagate.gateway.builtin.broker_addresses import UnmappableBrokerError
from quotagate.gateway.config import ListenerConfig
from quotagate.gateway.connection import ClientConnection
from quotagate.gateway.services import GatewayServices
from quotagate.gateway.tls import server_context
from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort

log = logging.getLogger(__name__)

_BACKLOG = 1024


class Listener:
    def __init__(self, config: ListenerConfig, services: GatewayServices) -> None:
        self.config = config
        self._services = services
        self._ssl = _ssl_context(config)
        self._servers: list[asyncio.Server] = []
        self._node_ports: dict[int, int] = {}
        self.bound: HostPort | None = None
        # The workers of one instance listen on the same ports; the kernel spreads
        # connections over them.
        self._shares_ports = services.config.workers > 1

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        bootstrap = self._services.config.bootstrap_servers

        def pick_bootstrap(attempt: int) -> HostPort:
            return bootstrap[attempt % len(bootstrap)]

        server = await loop.create_server(
            lambda: ClientConnection(self._services, self.config, pick_bootstrap),
            self.config.listen.host,
            self.config.listen.port,
            ssl=self._ssl,
            reuse_address=True,
            reuse_port=self._shares_ports,
            backlog=_BACKLOG,
        )
        self._servers.append(server)
        port = server.sockets[0].getsockname()[1]
        self.bound = HostPort(self.config.listen.host, port)
        log.info(
            kv(
                "listener_started",
                listener=self.config.name,
                address=self.bound,
                security_protocol=self.config.security_protocol,
            )
        )

    def map_broker(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Address mapper for this listener: learn the upstream node, answer our port for it."""
        if self._services.brokers.learn(node_id, host, port):
            log.info(kv("broker_discovered", node_id=node_id, upstream=f"{host}:{port}"))
        gateway_port = self._node_ports.get(node_id)
        if gateway_port is None:
            gateway_port = self._open_node_port(node_id)
        return self.config.advertised_host, gateway_port

    def _open_node_port(self, node_id: int) -> int:
        port = self.config.port_for_node(node_id)
        if port is None:
            raise UnmappableBrokerError(
                f"node id {node_id} is outside broker.node.id.start="
                f"{self.config.broker_node_id_start} + broker.port.count="
                f"{self.config.broker_port_count} on listener {self.config.name}"
            )
        # Bound and listening synchronously: the kernel queues connections from here on,
        # even before the event loop starts accepting them.
        sock = socket.socket(_family(self.config.listen.host), socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self._shares_ports:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((self.config.listen.host, port))
        except OSError as exc:
            sock.close()
            raise UnmappableBrokerError(
                f"cannot listen on port {port} for node {node_id}: {exc.strerror}"
            ) from exc
        sock.listen(_BACKLOG)
        sock.setblocking(False)
        self._node_ports[node_id] = port
        brokers = self._services.brokers

        def pick_node(_attempt: int) -> HostPort | None:
            return brokers.address(node_id)

        loop = asyncio.get_running_loop()
        task = loop.create_task(
            loop.create_server(
                lambda: ClientConnection(self._services, self.config, pick_node),
                sock=sock,
                ssl=self._ssl,
                backlog=_BACKLOG,
            )
        )
        task.add_done_callback(self._server_started)
        log.info(kv("broker_port_opened", listener=self.config.name, node_id=node_id, port=port))
        return port

    def _server_started(self, task: asyncio.Task[asyncio.Server]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._servers.append(task.result())

    def close(self) -> None:
        """Stop accepting connections (established ones are left to the gateway)."""
        for server in self._servers:
            server.close()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _ssl_context(config: ListenerConfig) -> ssl.SSLContext | None:
    if config.security_protocol not in SecurityProtocol.TLS:
        return None
    assert config.ssl_certificate_location and config.ssl_key_location
    return server_context(config.ssl_certificate_location, config.ssl_key_location)
