"""examples/: the Grafana dashboard and the Prometheus rules name only metrics the gateway
exports. The names are collected from the gateway's own collectors (its registry, the quota
collector over a real engine that saw traffic of every quota type, the instance's workers
collector), so a renamed or dropped metric fails here, not on someone's dashboard."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.core import Metric

from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.fleet.rolling_log import RollingTopicLog
from quotagate.fleet.settings import FleetSettings
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.instance.metrics import WorkersCollector
from quotagate.store.quotas import Change

EXAMPLES = Path(__file__).parents[1] / "examples"
DASHBOARD = EXAMPLES / "grafana" / "quotagate-dashboard.json"
RULES = EXAMPLES / "prometheus" / "quotagate-alerts.yml"
_NAME = re.compile(r"\bquotagate_[a-z0-9_]+\b")
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "unknown": ("",),
}


def _sample_names(families: Iterable[Metric]) -> set[str]:
    """What PromQL can select: a counter ``x`` is ``x_total``, a histogram ``x_bucket``..."""
    return {family.name + suffix for family in families for suffix in _SUFFIXES[family.type]}


@pytest.fixture(scope="module")
def exported() -> set[str]:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [
            Change({"client-id": "c"}, key, 100.0)
            for key in (
                "producer_byte_rate",
                "consumer_byte_rate",
                "request_percentage",
                "controller_mutation_rate",
            )
        ],
        "t",
        "t",
    )
    now = 1_700_000_000_000
    managers = runtime.managers
    for manager in (managers.produce, managers.fetch, managers.request):
        manager.record_and_get_throttle_ms("u", "c", 5000, now)
        manager.throttle("u", "c", 1, 10, now)
    managers.controller.new_strict_quota("u", "c", now).record(30, now)
    managers.controller.throttle("u", "c", 2, 10, now)
    runtime.clients[1] = ("u", "c")
    # A fleet member, never started: its series exist from the first report echoed.
    runtime.join_fleet(
        FleetSettings(exchange_enabled=True),
        "gw/0",
        lambda settings, _member: RollingTopicLog(
            "127.0.0.1:9", settings.topic, roll_ms=60_000, topic_config={}
        ),
    )
    assert runtime.fleet is not None
    runtime.fleet.exchange.echo_ms.append(5)
    runtime.last_now_ms = now
    runtime.tick(now)
    names = _sample_names(QuotaCollector(runtime).collect())
    names |= _sample_names(GatewayMetrics().registry.collect())
    names |= _sample_names(WorkersCollector(dict).collect())
    return names


def test_the_exported_names_include_the_per_key_figures(exported: set[str]) -> None:
    """Guards the fixture: an engine that saw no traffic would export no per-key series."""
    for group in ("produce", "fetch", "request", "controllermutation"):
        for series in ("quota", "quota_source", "throttle_time_ms_total", "connections"):
            assert f"quotagate_{group}_{series}" in exported
    assert "quotagate_requests_total" in exported
    assert "quotagate_upstream_latency_seconds_bucket" in exported
    assert "quotagate_worker_up" in exported


def _exprs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _exprs(item)


def test_the_dashboard_uses_only_exported_metrics(exported: set[str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    used = {name for expr in _exprs(dashboard) for name in _NAME.findall(expr)}
    assert len(used) >= 15
    assert used - exported == set()


def test_the_rules_use_only_exported_metrics(exported: set[str]) -> None:
    document = yaml.safe_load(RULES.read_text())
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    recorded = {rule["record"] for rule in rules if "record" in rule}
    alerts = {rule["alert"]: rule for rule in rules if "alert" in rule}
    assert "QuotagateEntityThrottled" in alerts
    throttled = alerts["QuotagateEntityThrottled"]["expr"]
    assert re.fullmatch(r"\s*quotagate:throttled_ratio5m > 0\.\d+\s*", throttled)
    assert recorded == {"quotagate:throttled_ratio5m"}
    used = {name for rule in rules for name in _NAME.findall(rule["expr"])}
    for group in ("produce", "fetch", "request", "controllermutation"):
        assert f"quotagate_{group}_throttle_time_ms_total" in used
    assert used - exported == set()
