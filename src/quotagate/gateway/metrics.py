"""Prometheus metrics of one gateway: connections, requests and bytes by API, upstream latency.

Each gateway owns its registry (tests run several in one process). The per-request series
(requests, bytes and upstream latency by API) are plain integers and floats on an
:class:`ApiMetrics` per API key, bumped by the event loop with no lock and no label look-up,
and exported at scrape time by :class:`ApiCollector` under the names and labels a
``prometheus_client`` Counter and Histogram would give them. The scrape thread only reads
them: a scrape may see one request counted whose bytes are not yet, never a torn number.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final, cast

import prometheus_client.metrics
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from quotagate.protocol.api_table import api_name

if TYPE_CHECKING:
    from quotagate.gateway.limits.memory_pool import MemoryPool

_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
_BOUNDS = (*_LATENCY_BUCKETS, float("inf"))  # not Final: mypyc leaves a Final built with * unset
_go_string = cast("Callable[[float], str]", floatToGoString)  # untyped upstream
_LE: Final = tuple(_go_string(bound) for bound in _BOUNDS)


class ApiMetrics:
    """One API's per-request series, as plain numbers the event loop bumps in place."""

    __slots__ = (
        "created",
        "latency_buckets",
        "latency_sum",
        "name",
        "request_bytes",
        "requests",
        "response_bytes",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.created = time.time()
        self.requests = 0
        self.request_bytes = 0
        self.response_bytes = 0
        self.latency_buckets = [0] * len(_BOUNDS)
        """Observations per bucket (not cumulative), the last one +Inf."""
        self.latency_sum = 0.0

    def observe_latency(self, seconds: float) -> None:
        # A Prometheus bucket counts values <= its bound: the first bound >= the value.
        self.latency_buckets[bisect_left(_BOUNDS, seconds)] += 1
        self.latency_sum += seconds


class ApiCollector(Collector):
    """Exports every :class:`ApiMetrics` as the Counter / Histogram families they replace."""

    def __init__(self, by_api: dict[int, ApiMetrics]) -> None:
        self._by_api = by_api

    def collect(self) -> Iterator[Metric]:
        apis = list(self._by_api.values())  # one C-level copy: the loop may add an API now
        # Read at scrape time, as prometheus_client's own metrics do.
        created = getattr(prometheus_client.metrics, "_use_created", True)
        for name, documentation, attribute in _COUNTERS:
            family = Metric(name, documentation, "counter")
            for api in apis:
                labels = {"api": api.name}
                family.add_sample(f"{name}_total", labels, float(getattr(api, attribute)))
                if created:
                    family.add_sample(f"{name}_created", labels, api.created)
            yield family
        name = "quotagate_upstream_latency_seconds"
        family = Metric(
            name, "Time from forwarding a request upstream to receiving its response", "histogram"
        )
        for api in apis:
            counts = list(api.latency_buckets)
            total = api.latency_sum
            cumulative = 0.0
            for le, count in zip(_LE, counts, strict=True):
                cumulative += count
                family.add_sample(f"{name}_bucket", {"api": api.name, "le": le}, cumulative)
            family.add_sample(f"{name}_count", {"api": api.name}, cumulative)
            family.add_sample(f"{name}_sum", {"api": api.name}, total)
            if created:
                family.add_sample(f"{name}_created", {"api": api.name}, api.created)
        yield family


_COUNTERS: Final = (
    ("quotagate_requests", "Requests received", "requests"),
    ("quotagate_request_bytes", "Request bytes received, size prefix included", "request_bytes"),
    ("quotagate_response_bytes", "Response bytes sent, size prefix included", "response_bytes"),
)


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
        self.authentication_refusals = Counter(
            "quotagate_authentication_refusals",
            "Clients refused: SASL failures, failed TLS handshakes, refused certificates",
            ["listener", "reason"], registry=r,
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
        self._by_api: dict[int, ApiMetrics] = {}
        r.register(ApiCollector(self._by_api))
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

    def bind_memory_pool(self, pool: MemoryPool) -> None:
        self.memory_pool_used.set_function(lambda: pool.used)
        self.memory_pool_waiting.set_function(lambda: pool.waiting)

    def api(self, api_key: int) -> ApiMetrics:
        metrics = self._by_api.get(api_key)
        if metrics is None:
            metrics = self._by_api[api_key] = ApiMetrics(api_name(api_key))
        return metrics
