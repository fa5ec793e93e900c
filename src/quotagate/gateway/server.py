"""The gateway: listeners, the stage chain, upstream discovery, idle sweeping, metrics, shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from quotagate.gateway.auth.authenticator import AuthenticatorFactory
from quotagate.gateway.builtin.api_versions import ApiVersionsStage
from quotagate.gateway.builtin.broker_addresses import BrokerAddressStage
from quotagate.gateway.builtin.sasl_on_plaintext import SaslOnPlaintextStage
from quotagate.gateway.config import GatewayConfig
from quotagate.gateway.health import HealthServer, Readiness, health_app, upstream_reachable
from quotagate.gateway.limits.connections import ConnectionLimits, wall_ms
from quotagate.gateway.limits.memory_pool import MemoryPool
from quotagate.gateway.listening.listener import Listener
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.gateway.refusals import RefusalLog
from quotagate.gateway.services import GatewayServices
from quotagate.gateway.stages.chain import StageChain
from quotagate.gateway.stages.plugin import Plugin
from quotagate.gateway.stages.stage import Stage
from quotagate.gateway.upstream.brokers import BrokerDirectory
from quotagate.gateway.upstream.discovery import discover
from quotagate.gateway.upstream.link import UpstreamHealth
from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort
from quotagate.quota.backoff import ExponentialBackoff

log = logging.getLogger(__name__)

# KIP-580 reconnect backoff shape (ClusterConnectionStates): base 2, jitter 0.2.
RECONNECT_MULTIPLIER = 2
RECONNECT_JITTER = 0.2


class Gateway:
    """A Kafka gateway in front of ``config.bootstrap_servers``.

    ``stages``, then each plug-in's stages, run in order on every request they ask for, ahead
    of the built-in ones (ApiVersions negotiation, SASL refusal on plain listeners, broker-address
    rewriting), so they see what the client sent and what the client will receive.
    """

    def __init__(
        self,
        config: GatewayConfig,
        stages: Sequence[Stage] = (),
        authenticator_factory: AuthenticatorFactory | None = None,
        metrics: GatewayMetrics | None = None,
        plugins: Sequence[Plugin] = (),
    ) -> None:
        if not config.bootstrap_servers:
            raise ValueError("the gateway needs upstream bootstrap servers")
        self.config = config
        self.metrics = metrics if metrics is not None else GatewayMetrics()
        self.listeners: dict[str, Listener] = {}
        api_versions = ApiVersionsStage()
        self.plugins = tuple(plugins)
        self.chain = StageChain(
            [
                *stages,
                *(stage for plugin in self.plugins for stage in plugin.stages()),
                api_versions,
                SaslOnPlaintextStage(),
                BrokerAddressStage(lambda name: self.listeners[name].map_broker),
            ]
        )
        api_versions.bind(self.chain)
        backoff = ExponentialBackoff(
            config.reconnect_backoff_ms,
            RECONNECT_MULTIPLIER,
            config.reconnect_backoff_max_ms,
            RECONNECT_JITTER,
        )
        memory_pool = MemoryPool(config.queued_max_request_bytes)
        self.metrics.bind_memory_pool(memory_pool)
        self.connection_limits = ConnectionLimits(config, self.metrics)
        self.services = GatewayServices(
            config=config,
            chain=self.chain,
            metrics=self.metrics,
            health=UpstreamHealth(backoff),
            brokers=BrokerDirectory(),
            authenticator_factory=authenticator_factory,
            memory_pool=memory_pool,
            limits=self.connection_limits,
            refusals=RefusalLog(
                self.metrics.authentication_refusals, config.log_refusals_interval_ms / 1000
            ),
        )
        for plugin in self.plugins:
            plugin.attach(self.connection_limits)
        for listener_config in config.listeners:
            self.listeners[listener_config.name] = Listener(listener_config, self.services)
        self._tasks: list[asyncio.Task[Any]] = []
        self._discovery: asyncio.Task[None] | None = None
        self._metrics_server: HealthServer | None = None
        self.readiness = gateway_readiness(self)
        self.metrics_address: HostPort | None = None

    async def start(self) -> None:
        started_plugins: list[Plugin] = []
        started: list[Stage] = []
        try:
            for plugin in self.plugins:
                await plugin.start()
                started_plugins.append(plugin)
            for stage in self.chain.stages:
                await stage.start()
                started.append(stage)
            for listener in self.listeners.values():
                await listener.start()
            self._start_metrics()
        except BaseException:
            # A port in use must not leave the stages' threads, timers and store open.
            for listener in self.listeners.values():
                listener.close()
            for stage in reversed(started):
                await stage.close()
            for plugin in reversed(started_plugins):
                await plugin.close()
            raise
        for warning in self.config.upstream_security.warnings:
            log.warning(kv("upstream_config", note=warning))
        sinks = [listener.map_broker for listener in self.listeners.values()]
        loop = asyncio.get_running_loop()
        self._discovery = loop.create_task(
            discover(
                self.config.bootstrap_servers,
                self.services.health,
                self.chain,
                sinks,
                self.config.upstream_security,
            )
        )
        self._tasks.append(self._discovery)
        self._tasks.append(loop.create_task(self._sweep()))

    async def discovered(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the first discovery round (the upstream's brokers
        known, their ports open); whether it came."""
        discovery = self._discovery
        if discovery is None:
            return False
        done, _ = await asyncio.wait({discovery}, timeout=timeout_s)
        return bool(done)

    @property
    def bootstrap(self) -> dict[str, HostPort]:
        """Listener name → the bootstrap address clients should use."""
        result: dict[str, HostPort] = {}
        for name, listener in self.listeners.items():
            assert listener.bound is not None, "gateway not started"
            result[name] = HostPort(listener.config.advertised_host, listener.bound.port)
        return result

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight requests finish (up to shutdown.timeout.ms), close."""
        self.readiness.drain()  # first: /readyz says so while the rest drains
        for listener in self.listeners.values():
            listener.close()
        for task in self._tasks:
            task.cancel()
        self.connection_limits.close()
        connections = list(self.services.connections)
        log.info(kv("shutdown_started", connections=len(connections)))
        for connection in connections:
            connection.begin_drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout_ms / 1000
        while any(not c.closed for c in connections) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        left = [c for c in connections if not c.closed]
        for connection in left:
            connection.close("shutdown timeout", logging.WARNING)
        # Give transports one turn of the loop to flush and report connection_lost.
        await asyncio.sleep(0)
        for stage in self.chain.stages:
            await stage.close()
        for plugin in reversed(self.plugins):
            await plugin.close()
        self._stop_metrics()
        log.info(kv("shutdown_complete", abandoned=len(left)))

    async def _sweep(self) -> None:
        """Close connections idle past connections.max.idle.ms and partial frames that have
        not arrived whole within frame.read.timeout.ms (ClientConnection.expire)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        frame_s = self.config.frame_read_timeout_ms / 1000
        interval = min(max(min(idle_s, frame_s) / 4, 0.05), 5.0)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in list(self.services.connections):
                connection.expire(now, idle_s, frame_s)
            self.connection_limits.tick(wall_ms())
            self.services.refusals.flush()

    def _start_metrics(self) -> None:
        address = self.config.metrics_listen
        if address is None:
            return
        server = HealthServer(address, health_app(self.metrics.registry, self.readiness))
        self._metrics_server = server
        self.metrics_address = server.address
        log.info(kv("metrics_started", address=f"http://{self.metrics_address}/metrics"))

    def _stop_metrics(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.stop()
            self._metrics_server = None


def gateway_readiness(gateway: Gateway) -> Readiness:
    """What ``/readyz`` checks for one gateway (the health module's docstring says why)."""
    readiness = Readiness()

    def listeners() -> str | None:
        closed = [name for name, listener in gateway.listeners.items() if listener.bound is None]
        return f"not listening yet: {', '.join(closed)}" if closed else None

    readiness.add("listeners", listeners)
    readiness.add("upstream", upstream_reachable(gateway.config.bootstrap_servers))
    for plugin in gateway.plugins:
        readiness.add(type(plugin).__name__, plugin.readiness)
    return readiness
