"""Prometheus view of the quotas, named after Kafka's quota metrics (spec §3.8).

Kafka metric ``<name>`` of group ``<Group>`` (JMX ``kafka.server:type=<Group>``) becomes
``quotagate_<group>_<name>`` with ``-`` turned into ``_`` and the ``user`` / ``client-id``
tags as ``user`` / ``client_id`` labels, e.g. ``quotagate_produce_byte_rate``,
``quotagate_request_request_time``, ``quotagate_fetch_throttle_time``,
``quotagate_request_exempt_request_time``, ``quotagate_produce_queue_size``,
``quotagate_controllermutation_tokens``. The configured bound of each live sharing key is
``quotagate_<group>_quota`` (KIP-786). Not Kafka's, for a person watching (``quotagate top``)
and for alerts, one series each per sharing key too: ``quotagate_<group>_quota_source`` (1,
its ``source`` label names which of Kafka's eight levels configures the key: eight values and
``none``), ``quotagate_<group>_throttle_time_ms_total`` (a counter of throttle ms, whose rate
is the fraction of time the key is throttled) and ``quotagate_<group>_connections`` (open
connections whose latest request was measured on the key). Label sets disappear when Kafka
would expire the sensor (one hour idle), because the snapshot is rebuilt from the live sensors
only.

The tenant level (issue 25) is exported the same way per live tenant sensor, under
``quotagate_tenant_<group>_...`` with one ``tenant`` label (rate, quota, quota source
``tenant`` or ``default-tenant`` in a ``source`` label, throttle time and its total: a
throttle the tenant level imposed is recorded there, not on the client's key);
its cardinality is bounded as the client keys' are, by the live sensors. The exempt
principals (``quota.exempt.principals``, a configured list) are
``quotagate_exempt_principal{user}`` = 1, and while any is configured each sharing key has
``quotagate_<group>_exempt_connections``: its open connections of exempt principals (a key of
a client-id quota names no user, so this is how ``top`` marks it).

The engine is not thread-safe, so the event loop builds a snapshot every housekeeping tick
and the scrape thread only reads the latest one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from quotagate.enforcement.shadow import COUNTERS as SHADOW_COUNTERS
from quotagate.quota import QuotaManagers, TopicBytesInQuota
from quotagate.quota.java import UNBOUNDED
from quotagate.usage.sink import UsageSink

_LABELS = ["user", "client_id"]


class QuotaState(Protocol):
    """What the snapshot reads: the runtime's engine state and counters."""

    @property
    def managers(self) -> QuotaManagers: ...
    @property
    def clients(self) -> Mapping[int, tuple[str, str]]: ...
    @property
    def topic_quota(self) -> TopicBytesInQuota: ...
    @property
    def usage(self) -> UsageSink | None: ...
    @property
    def topic_refusals(self) -> int: ...
    @property
    def topic_throttles(self) -> int: ...
    @property
    def snapshot(self) -> dict[str, Any]: ...


def build_snapshot(runtime: QuotaState, now_ms: int) -> dict[str, Any]:
    series: dict[str, list[tuple[list[str], float]]] = {}

    def add(name: str, labels: list[str], value: float) -> None:
        series.setdefault(name, []).append((labels, value))

    exempt_users = runtime.managers.exempt_users
    # The value a quota is checked against: a Rate for the first three, the KIP-599 token
    # bucket for controller mutations. states() peeks, so exporting never changes a throttle.
    for group, manager, value_name in (
        ("produce", runtime.managers.produce, "byte_rate"),
        ("fetch", runtime.managers.fetch, "byte_rate"),
        ("request", runtime.managers.request, "request_time"),
        ("controllermutation", runtime.managers.controller, "tokens"),
    ):
        connections: dict[tuple[str, str], int] = {}
        exempt_connections: dict[tuple[str, str], int] = {}
        if manager.quotas_enabled:
            for user, client_id in runtime.clients.values():
                key = manager.sharing_key(user, client_id)
                connections[key] = connections.get(key, 0) + 1
                if user in exempt_users:
                    # A key without a user part (a client-id quota) cannot name the exempt
                    # principal: the count says the key's traffic comes from one.
                    exempt_connections[key] = exempt_connections.get(key, 0) + 1
        for state in manager.states(now_ms):
            labels = [state.key[0], state.key[1]]
            add(f"{group}_{value_name}", labels, state.value)
            add(f"{group}_quota", labels, state.limit)
            add(f"{group}_quota_source", [*labels, state.source], 1.0)
            if not math.isnan(state.throttle_time_avg):
                add(f"{group}_throttle_time", labels, state.throttle_time_avg)
            add(f"{group}_throttle_time_ms", labels, state.throttle_ms_total)
            add(f"{group}_connections", labels, float(connections.get(state.key, 0)))
            if exempt_users:
                exempt = float(exempt_connections.get(state.key, 0))
                add(f"{group}_exempt_connections", labels, exempt)
        add(f"{group}_queue_size", [], float(manager.throttled_channels.queue_size))
    _add_tenant_level(runtime.managers, now_ms, add)
    for user in sorted(runtime.managers.exempt_users):
        add("exempt_principal", [user], 1.0)
    for key, rate in runtime.managers.controller.mutation_rates(now_ms):
        add("controllermutation_mutation_rate", [key[0], key[1]], rate)
    add("request_exempt_request_time", [], runtime.managers.request.exempt_rate(now_ms))
    quota = runtime.topic_quota
    add("topic_total_bytes_in_rate", [], quota.total_meter.peek_one_minute_rate(now_ms))
    add("topic_error_bytes_in_rate", [], quota.error_meter.peek_one_minute_rate(now_ms))
    add("topic_throttled_bytes_in_rate", [], quota.throttled_meter.peek_one_minute_rate(now_ms))
    if quota.total_threshold is not None:
        add("topic_total_bytes_in_threshold", [], quota.total_threshold)
    for topic in list(quota.topic_meters):
        add("topic_bytes_in_rate", [topic], quota.topic_rate(topic, now_ms))
        threshold = quota.threshold_for(topic)
        if threshold is not None:
            add("topic_bytes_in_threshold", [topic], threshold)
    usage = runtime.usage
    counters = {
        "usage_events_dropped": float(usage.dropped if usage else 0),
        "usage_events_written": float(usage.written if usage else 0),
        "topic_refusals": float(runtime.topic_refusals),
        "topic_throttles": float(runtime.topic_throttles),
    }
    return {"series": series, "counters": counters}


def _add_tenant_level(
    managers: QuotaManagers, now_ms: int, add: Callable[[str, list[str], float], None]
) -> None:
    """``tenant_<group>_...`` per live tenant sensor, labelled by the tenant's name."""
    tenants = managers.tenants
    if tenants is None:
        return
    for group, manager, value_name in tenants.kinds():
        for state in manager.states(now_ms):
            labels = [state.key[0]]
            add(f"{TENANT_PREFIX}{group}_{value_name}", labels, state.value)
            add(f"{TENANT_PREFIX}{group}_quota", labels, state.limit)
            source = _TENANT_SOURCES.get(state.source, state.source)
            add(f"{TENANT_PREFIX}{group}_quota_source", [*labels, source], 1.0)
            if not math.isnan(state.throttle_time_avg):
                add(f"{TENANT_PREFIX}{group}_throttle_time", labels, state.throttle_time_avg)
            add(f"{TENANT_PREFIX}{group}_throttle_time_ms", labels, state.throttle_ms_total)
    for key, rate in tenants.controller.mutation_rates(now_ms):
        add(f"{TENANT_PREFIX}controllermutation_mutation_rate", [key[0]], rate)


_TENANT_SOURCES = {"user": "tenant", "default-user": "default-tenant"}
"""The tenant level keys its sensors by the tenant's name as a user: its quota is the tenant's
own (``--entity-type tenant --entity-name``) or the default tenant's, named so."""

TENANT_PREFIX = "tenant_"
"""Series of the tenant level: labelled ``tenant`` only."""
_TENANT_SERIES = (TENANT_PREFIX, f"shadow_{TENANT_PREFIX}")

_HELP = {
    "byte_rate": "Bytes per second over the quota window (Kafka byte-rate)",
    "request_time": "Percent of one thread's time over the quota window (Kafka request-time)",
    "throttle_time": "Average throttle time in ms (Kafka throttle-time)",
    "quota": "Configured quota bound of this sharing key (KIP-786)",
    "quota_source": "1 for the level of Kafka's eight whose quota applies to this sharing key",
    "throttle_time_ms": "Throttle time recorded on this sharing key, ms, since it appeared",
    "connections": "Open connections whose latest request was measured on this sharing key",
    "exempt_connections": "Of those, the connections of exempt principals",
    "queue_size": "Channels currently throttled (Kafka queue-size)",
    "tokens": "KIP-599 token bucket level (Kafka tokens)",
    "fleet_peers": "Other workers of the fleet this worker accounts for, by state",
    "fleet_exchange_healthy": "1 while this worker reads its own usage reports back",
    "fleet_reports_published": "Usage reports this worker published to the fleet",
    "fleet_reports_skipped": "Undecodable records skipped on the usage topic",
    "fleet_remote_recorded": "Peers' usage recorded into this worker's sensors, per quota kind",
    "fleet_fallback_recorded": "Fair shares recorded for silent peers, per quota kind",
    "fleet_report_echo_ms": "Publish-to-read-back latency of this worker's usage reports",
    "shadow_would_throttle_seconds": "Throttle the shadow quotas would have imposed, seconds",
    "shadow_would_throttle_requests": "Requests the shadow quotas would have throttled",
    "shadow_refused_mutations": "Topics a strict shadow mutation quota would have refused",
    "shadow_refused_requests": "Mutation requests a shadow quota would have refused a topic of",
    "shadow_would_throttle_ratio": "Share of time the key would spend throttled under its "
    "shadow quota (1 - quota / rate)",
    "exempt_principal": "1 per principal of quota.exempt.principals (metered, never throttled)",
}

# Exported as counters (``_total``): an instance sums them over its workers.
_COUNTER_SUFFIX = "_throttle_time_ms"

# Series whose labels are not a sharing key's (user, client_id).
_OTHER_LABELS = {
    "topic_bytes_in_rate": ["topic"],
    "topic_bytes_in_threshold": ["topic"],
    "fleet_peers": ["state"],
    "fleet_remote_recorded": ["kind"],
    "fleet_fallback_recorded": ["kind"],
    "fleet_report_echo_ms": ["quantile"],
    "exempt_principal": ["user"],
}


class QuotaCollector(Collector):
    def __init__(self, runtime: QuotaState) -> None:
        self._runtime = runtime

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        snapshot = self._runtime.snapshot
        for name, points in snapshot.get("series", {}).items():
            if name in _OTHER_LABELS:
                labels = _OTHER_LABELS[name]
            elif name.startswith(_TENANT_SERIES):
                labels = ["tenant", "source"] if name.endswith("_quota_source") else ["tenant"]
            elif name.endswith("_quota_source"):
                labels = [*_LABELS, "source"]
            else:
                labels = _LABELS if points and points[0][0] else []
            # The longest matching suffix: "throttle_time_ms" is not "throttle_time".
            suffix = max((k for k in _HELP if name.endswith(k)), key=len, default=None)
            help_text = _HELP[suffix] if suffix is not None else name
            family: GaugeMetricFamily | CounterMetricFamily
            if name.endswith(_COUNTER_SUFFIX) or name in SHADOW_COUNTERS:
                family = CounterMetricFamily(f"quotagate_{name}", help_text, labels=labels)
            else:
                family = GaugeMetricFamily(f"quotagate_{name}", help_text, labels=labels)
            for label_values, value in points:
                family.add_metric(label_values, _finite(value))
            yield family
        for name, value in snapshot.get("counters", {}).items():
            family = GaugeMetricFamily(f"quotagate_{name}", name.replace("_", " "))
            family.add_metric([], value)
            yield family


def _finite(value: float) -> float:
    # Unbounded quotas are Long.MAX_VALUE; Prometheus takes it as a float anyway.
    return value if not math.isinf(value) else UNBOUNDED
