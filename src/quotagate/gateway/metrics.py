"""Prometheus metrics of one gateway: connections, requests and bytes by API, upstream latency.

Each gateway owns its registry (tests run several in one process). Labelled children are
cached per API key so the per-request cost is a few attribute lookups and increments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from quotagate.protocol.api_table import api_name

if TYPE_CHECKING:
    from quotagate.gateway.memory_pool import MemoryPool

_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass(slots=True)
class ApiMetrics:
    requests: Counter
    request_bytes: Counter
    response_bytes: Counter
    upstream_latency: Histogram


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.connections = Gauge(
            "quotagate_connections", "Open client connections", ["listener"], registry=r
        )
        self.connections_accepted = Counter(
            "quotagate_connections_accepted", "Client connections accepted", ["listener"],
            registry=r,
        )  # fmt: skip
        self.connections_closed = Counter(
            "quotagate_connections_closed", "Client connections closed by the gateway",
            ["reason"], registry=r,
        )  # fmt: skip
        # Connection quotas. Per-IP series only for addresses with a limit of their own (an
        # ip quota entity, a max.connections.per.ip.overrides entry): others are "<default>".
        self.connections_throttled = Counter(
            "quotagate_connections_throttled",
            "Connections over their IP's connection_creation_rate, held and closed",
            ["listener", "ip"], registry=r,
        )  # fmt: skip
        self.connections_refused = Counter(
            "quotagate_connections_refused",
            "Connections refused at max.connections.per.ip", ["listener", "ip"], registry=r,
        )  # fmt: skip
        self.acceptor_waits = Counter(
            "quotagate_connection_acceptor_waits",
            "Times a listener stopped accepting: creation rate exceeded or no connection slot",
            ["listener", "reason"], registry=r,
        )  # fmt: skip
        self.acceptor_blocked_seconds = Counter(
            "quotagate_connection_acceptor_blocked_seconds",
            "Time a listener did not accept connections (Kafka's AcceptorBlockedPercent)",
            ["listener"], registry=r,
        )  # fmt: skip
        self.upstream_connect_failures = Counter(
            "quotagate_upstream_connect_failures", "Failed upstream connection attempts",
            registry=r,
        )  # fmt: skip
        self._requests = Counter("quotagate_requests", "Requests received", ["api"], registry=r)
        self._request_bytes = Counter(
            "quotagate_request_bytes", "Request bytes received, size prefix included", ["api"],
            registry=r,
        )  # fmt: skip
        self._response_bytes = Counter(
            "quotagate_response_bytes", "Response bytes sent, size prefix included", ["api"],
            registry=r,
        )  # fmt: skip
        self._upstream_latency = Histogram(
            "quotagate_upstream_latency_seconds",
            "Time from forwarding a request upstream to receiving its response",
            ["api"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        # Read from the pool at scrape time: nothing on the per-request path.
        self.memory_pool_used = Gauge(
            "quotagate_memory_pool_used_bytes",
            "Request bytes reserved in the queued.max.request.bytes pool", registry=r,
        )  # fmt: skip
        self.memory_pool_waiting = Gauge(
            "quotagate_memory_pool_waiting_connections",
            "Connections not read because the queued.max.request.bytes pool is exhausted",
            registry=r,
        )  # fmt: skip
        self._by_api: dict[int, ApiMetrics] = {}

    def bind_memory_pool(self, pool: MemoryPool) -> None:
        self.memory_pool_used.set_function(lambda: pool.used)
        self.memory_pool_waiting.set_function(lambda: pool.waiting)

    def api(self, api_key: int) -> ApiMetrics:
        metrics = self._by_api.get(api_key)
        if metrics is None:
            name = api_name(api_key)
            metrics = ApiMetrics(
                self._requests.labels(name),
                self._request_bytes.labels(name),
                self._response_bytes.labels(name),
                self._upstream_latency.labels(name),
            )
            self._by_api[api_key] = metrics
        return metrics
