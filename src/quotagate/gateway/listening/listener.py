"""One configured listener: a bootstrap port plus one port per upstream broker.

Port-per-broker (as in Kroxylicious): upstream node ``n`` is reached through
``broker.port.start + (n - broker.node.id.start)``. A broker port is opened the first time
a response names that node, before the response reaches the client, so the address a
client learns is always already accepting connections.
"""

from __future__ import annotations

import logging
import socket
import ssl

from quotagate.gateway.auth.listener import listener_authenticators
from quotagate.gateway.auth.mtls import certificate_principals
from quotagate.gateway.builtin.broker_addresses import UnmappableBrokerError
from quotagate.gateway.config import ListenerConfig
from quotagate.gateway.connection import ClientConnection
from quotagate.gateway.limits.connections import Slot
from quotagate.gateway.listening.acceptor import Acceptor, ProtocolFactory
from quotagate.gateway.listening.sni import SniRoute, capture_server_names
from quotagate.gateway.listening.tls import ClientAuth, server_context
from quotagate.gateway.services import GatewayServices
from quotagate.gateway.upstream.link import AddressPicker
from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.sni_names import SniPattern
from quotagate.security.protocol import SecurityProtocol

log = logging.getLogger(__name__)

_BACKLOG = 1024


class Listener:
    def __init__(self, config: ListenerConfig, services: GatewayServices) -> None:
        self.config = config
        self._services = services
        self._ssl = _ssl_context(config)
        # Chosen once for the listener, as Kafka's ChannelBuilders does.
        self._authenticators = listener_authenticators(
            config, services.authenticator_factory, certificate_principals(config)
        )
        self._sni = SniPattern(config.sni_host_pattern) if config.sni_host_pattern else None
        if self._sni is not None and self._ssl is not None:
            capture_server_names(self._ssl)
        self._acceptor: Acceptor | None = None
        self._node_ports: dict[int, int] = {}
        self.bound: HostPort | None = None
        # The workers of one instance listen on the same ports; the kernel spreads
        # connections over them.
        self._shares_ports = services.config.workers > 1

    async def start(self) -> None:
        bootstrap = self._services.config.bootstrap_servers

        def pick_bootstrap(attempt: int) -> HostPort:
            return bootstrap[attempt % len(bootstrap)]

        proxy_timeout_s = (
            self.config.proxy_protocol_timeout_ms / 1000
            if self.config.proxy_protocol == "required"
            else None
        )
        self._acceptor = Acceptor(
            self.config.name,
            self._services.limits,
            self._ssl,
            self._services.refusals,
            proxy_timeout_s,
        )
        try:
            sock = self._listen(self.config.listen.port)
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot listen on {self.config.listen}: {exc.strerror}"
            ) from exc
        self._acceptor.add(sock, self._factory(pick_bootstrap))
        port = sock.getsockname()[1]
        self.bound = HostPort(self.config.listen.host, port)
        log.info(
            kv(
                "listener_started",
                listener=self.config.name,
                address=self.bound,
                security_protocol=self.config.security_protocol,
            )
        )

    def _factory(self, pick: AddressPicker) -> ProtocolFactory:
        services, config, authenticators = self._services, self.config, self._authenticators
        sni = self._sni
        if sni is not None:  # every connection routed by its own TLS server name

            def make_routed(slot: Slot) -> ClientConnection:
                route = SniRoute(config.name, sni, services.brokers, pick)
                return ClientConnection(services, config, route, authenticators(), slot)

            return make_routed

        def make(slot: Slot) -> ClientConnection:
            return ClientConnection(services, config, pick, authenticators(), slot)

        return make

    def map_broker(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Address mapper for this listener: learn the upstream node, answer our port for it."""
        if self._services.brokers.learn(node_id, host, port):
            log.info(kv("broker_discovered", node_id=node_id, upstream=f"{host}:{port}"))
        if self._sni is not None and self.bound is not None:
            return self._sni.host(node_id), self.bound.port
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
        try:
            sock = self._listen(port)
        except OSError as exc:
            raise UnmappableBrokerError(
                f"cannot listen on port {port} for node {node_id}: {exc.strerror}"
            ) from exc
        self._node_ports[node_id] = port
        brokers = self._services.brokers

        def pick_node(_attempt: int) -> HostPort | None:
            return brokers.address(node_id)

        assert self._acceptor is not None, "listener not started"
        self._acceptor.add(sock, self._factory(pick_node))
        log.info(kv("broker_port_opened", listener=self.config.name, node_id=node_id, port=port))
        return port

    def _listen(self, port: int) -> socket.socket:
        """Bound and listening synchronously: the kernel queues connections from here on,
        even before the acceptor takes them (and while it waits)."""
        sock = socket.socket(_family(self.config.listen.host), socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self._shares_ports:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((self.config.listen.host, port))
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        """Stop accepting connections (established ones are left to the gateway)."""
        if self._acceptor is not None:
            self._acceptor.close()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _ssl_context(config: ListenerConfig) -> ssl.SSLContext | None:
    if config.security_protocol not in SecurityProtocol.TLS:
        return None
    assert config.ssl_certificate_location and config.ssl_key_location
    return server_context(
        config.ssl_certificate_location,
        config.ssl_key_location,
        truststore=config.ssl_ca_location,
        client_auth=_client_auth(config.ssl_client_auth),
    )


def _client_auth(value: str) -> ClientAuth:
    if value == "requested":
        return "requested"
    if value == "required":
        return "required"
    return "none"
