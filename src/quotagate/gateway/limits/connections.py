"""The gateway's connection quotas: the sans-I/O :class:`ConnectionQuotas` and the I/O it asks for.

Holds the one ``ConnectionQuotas`` of this process, the sockets held unread because their IP
was over its connection creation rate (closed when their throttle ends, as Kafka's acceptor
does), and the acceptors waiting for a free slot, woken whenever a connection closes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import Final

from quotagate.gateway.config import GatewayConfig
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.logs import kv
from quotagate.quota.connection_quotas import ConnectionQuotas
from quotagate.quota.java import INT_MAX

log = logging.getLogger(__name__)

KAFKA_WINDOWS: Final = (11, 1)
"""Kafka's ``quota.window.num`` and ``quota.window.size.seconds``, over which a broker measures
connection creation rates as it does client quotas."""
DEFAULT_IP: Final = "<default>"
"""The ``ip`` label of connections whose IP has no limit of its own: per-IP series exist only
for addresses an operator named, so a scan from many addresses cannot grow the metrics."""


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Slot:
    """One counted connection; released once, whichever way the connection ends."""

    __slots__ = ("_ip", "_limits", "_listener", "_released", "client")

    def __init__(
        self,
        limits: ConnectionLimits,
        listener: str,
        ip: str,
        client: tuple[str, int] | None = None,
    ) -> None:
        self._limits = limits
        self._listener = listener
        self._ip = ip
        self._released = False
        self.client = client
        """The client's address as a PROXY protocol header named it (None: the peer's)."""

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._limits.release(self._listener, self._ip)


class ConnectionLimits:
    def __init__(self, config: GatewayConfig, metrics: GatewayMetrics) -> None:
        self._config = config
        self.quotas = self._quotas(*KAFKA_WINDOWS)
        self._ip_rates_set = False
        self.metrics = metrics
        self._held: dict[socket.socket, asyncio.TimerHandle] = {}
        self._waiting: set[Callable[[], None]] = set()

    def _quotas(self, window_num: int, window_size_s: int) -> ConnectionQuotas:
        config = self._config
        quotas = ConnectionQuotas(
            window_num=window_num,
            window_size_s=window_size_s,
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            max_connections_per_ip_overrides=dict(config.max_connections_per_ip_overrides),
            max_connection_creation_rate=config.max_connection_creation_rate,
        )
        for listener in config.listeners:
            quotas.add_listener(
                listener.name, listener.max_connections, listener.max_connection_creation_rate
            )
        return quotas

    # -- what a plug-in may call (Plugin.attach) -------------------------------------------

    def measure_rates_over(self, window_num: int, window_size_s: int) -> None:
        """Measure creation rates over ``window_num`` windows of ``window_size_s`` (Kafka's
        defaults otherwise). Only before any connection and any per-IP rate: the rate sensors
        are made for their windows."""
        if self.quotas.total or self._ip_rates_set:
            raise RuntimeError("the connection rate windows are set before anything is counted")
        self.quotas = self._quotas(window_num, window_size_s)

    def set_ip_connection_rate(self, ip: str | None, rate: float | None) -> None:
        """``connection_creation_rate`` of ip ``ip`` (None: the default ip entity); ``rate``
        None removes it. Kafka narrows the value to an int, saturating."""
        value = None if rate is None else int(min(max(rate, 0), INT_MAX))
        self._ip_rates_set = True
        self.quotas.update_ip_connection_rate_quota(ip, value)
        log.info(kv("ip_connection_rate_changed", ip=ip or DEFAULT_IP, rate=value))

    # -- acceptors -------------------------------------------------------------------------

    def wait_for_slot(self, wake: Callable[[], None]) -> None:
        self._waiting.add(wake)

    def stop_waiting(self, wake: Callable[[], None]) -> None:
        self._waiting.discard(wake)

    def release(self, listener: str, ip: str) -> None:
        self.quotas.dec(listener, ip)
        if self._waiting:
            # Any listener's close may free the gateway-wide slot, so every waiter looks.
            for wake in list(self._waiting):
                wake()

    def hold(self, sock: socket.socket, listener: str, ip: str, throttle_ms: int) -> None:
        """Keep an over-rate connection open and unread for its throttle time, then close it:
        the client sees no answer rather than a fast refusal it would retry at once."""
        self.metrics.connections_throttled.labels(listener, self.ip_rate_label(ip)).inc()
        loop = asyncio.get_running_loop()
        self._held[sock] = loop.call_later(throttle_ms / 1000, self._close_held, sock)
        log.debug(kv("connection_throttled", listener=listener, client=ip, throttle_ms=throttle_ms))

    def _close_held(self, sock: socket.socket) -> None:
        self._held.pop(sock, None)
        sock.close()

    def ip_rate_label(self, ip: str) -> str:
        return ip if self.quotas.has_ip_rate_override(ip) else DEFAULT_IP

    def ip_count_label(self, ip: str) -> str:
        return ip if self.quotas.has_max_connections_override(ip) else DEFAULT_IP

    def tick(self, now_ms: int) -> None:
        self.quotas.expire_sensors(now_ms)

    def close(self) -> None:
        """Close every held socket (shutdown)."""
        for sock, timer in self._held.items():
            timer.cancel()
            sock.close()
        self._held.clear()
        self._waiting.clear()
