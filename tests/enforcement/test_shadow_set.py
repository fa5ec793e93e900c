"""The shadow set: its keys, how the store configures it (both backends, a fleet sharing one
config topic), what its metrics and ``quotagate top`` show, and the CLI that sets and promotes
it. The live behaviour on real traffic is tests/enforcement/test_shadow_quotas.py."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from rich.console import Console
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.quota import QuotaConfigError, RequestFacts, classify, validate_alteration
from quotagate.quota.request_rules import CREATE_TOPICS, PRODUCE
from quotagate.store.backends import StoreSettings, open_quota_store
from quotagate.store.quotas import Change
from quotagate.top.model import Scrape, parse
from quotagate.top.view import render

NOW = 1_700_000_000_000
runner = CliRunner()


def test_a_shadow_key_is_validated_as_the_key_it_shadows() -> None:
    entity = [("client-id", "app")]
    _, changes = validate_alteration(entity, [("shadow.producer_byte_rate", 1024.0)])
    assert changes == {"shadow.producer_byte_rate": 1024.0}
    validate_alteration(entity, [("shadow.request_percentage", 12.5)])
    with pytest.raises(QuotaConfigError, match=r"shadow\.producer_byte_rate cannot be a fraction"):
        validate_alteration(entity, [("shadow.producer_byte_rate", 1.5)])
    with pytest.raises(QuotaConfigError, match=r"Invalid configuration key shadow\.bogus"):
        validate_alteration(entity, [("shadow.bogus", 1.0)])
    # Connection rates of ip entities have no shadow: a connection cannot be both.
    with pytest.raises(QuotaConfigError, match=r"Invalid configuration key shadow\.connection"):
        validate_alteration([("ip", "10.0.0.1")], [("shadow.connection_creation_rate", 5.0)])


def _produce(runtime: QuotaRuntime, client_id: str, size: int, now_ms: int) -> int:
    facts = RequestFacts(classify(PRODUCE, 9, acks=1), "", client_id, PRODUCE, 9, now_ms, size)
    assert runtime.response_throttle.shadow is not None
    return runtime.response_throttle.shadow.observe(facts)


def test_the_store_configures_the_shadow_set_and_leaves_the_live_quotas_alone(
    tmp_path: Path,
) -> None:
    store = tmp_path / "quotagate.db"
    runtime = QuotaRuntime(QuotaSettings(), store=open_quota_store(StoreSettings(path=str(store))))
    assert runtime.response_throttle.shadow is None  # nothing to pay for on the hot path
    shadow = Change({"client-id": "app"}, "shadow.producer_byte_rate", 1000.0)
    runtime.store_sync.alter_client_quotas([shadow], "User:admin", "test")
    assert runtime.response_throttle.shadow is runtime.shadow
    assert not runtime.managers.produce.quotas_enabled  # nobody is enforced on
    # 30 kB at once against 1000 B/s: the shadow would throttle, the live quotas never knew.
    assert _produce(runtime, "app", 30_000, NOW) > 0
    assert _produce(runtime, "other", 30_000, NOW) == 0

    # Another process on the same store reads the shadow set from it.
    other = QuotaRuntime(QuotaSettings(), store=open_quota_store(StoreSettings(path=str(store))))
    assert other.response_throttle.shadow is other.shadow
    assert other.store_sync.client_quotas[(("client-id", "app"),)] == {
        "shadow.producer_byte_rate": 1000.0
    }

    runtime.store_sync.alter_client_quotas(
        [Change(shadow.entity, shadow.key, None)], "User:admin", "test"
    )
    assert runtime.response_throttle.shadow is None
    other.store_sync.reload()
    assert other.response_throttle.shadow is None
    runtime.store_sync.close()
    other.store_sync.close()


def test_metrics_and_top_show_what_the_shadow_would_throttle() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "app"}, "shadow.producer_byte_rate", 1000.0)], "t", "t"
    )
    for i in range(10):  # 3000 B/s over 10 s, three times the shadow quota
        _produce(runtime, "app", 3000, NOW + i * 1000)
    runtime.last_now_ms = NOW + 9_000
    runtime.tick(NOW + 9_000)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    text = generate_latest(registry).decode()
    assert 'quotagate_shadow_produce_quota{client_id="app",user=""} 1000.0' in text
    assert 'quotagate_shadow_would_throttle_seconds_total{client_id="app",user=""}' in text
    assert 'quotagate_shadow_would_throttle_requests_total{client_id="app",user=""}' in text
    # No live quota: no live series for the key, and the live quotas never throttled.
    assert 'quotagate_produce_quota{client_id="app"' not in text

    rows = parse([Scrape("http://gw/metrics", text)]).rows
    (row,) = [r for r in rows if r.client_id == "app"]
    assert row.shadow_quota == 1000.0 and row.quota is None
    assert row.shadow_ratio is not None and 0.5 < row.shadow_ratio < 0.75  # 1 - 1000 / ~3000
    console = Console(width=200, record=True)
    console.print(render(parse([Scrape("u", text)]), rows, sort="usage", window_s=10, clock=""))
    screen = console.export_text()
    assert "shadow: would throttle" in screen
    assert f"{row.shadow_ratio * 100:.0f}% of 1.0k B/s" in screen


def test_a_tenant_can_have_a_shadow_quota() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"tenant": "acme"}, "shadow.producer_byte_rate", 1000.0)], "t", "t"
    )
    shadow = runtime.response_throttle.shadow
    assert shadow is not None
    charging = classify(PRODUCE, 9, acks=1)
    for tenant, throttled in (("acme", True), ("", False)):
        facts = RequestFacts(charging, "", f"app-{tenant}", PRODUCE, 9, NOW, 30_000, tenant=tenant)
        assert (shadow.observe(facts) > 0) is throttled, tenant
    for i in range(1, 10):  # 3000 B/s over 10 s, three times the tenant's shadow quota
        now = NOW + i * 1000
        shadow.observe(RequestFacts(charging, "", "app", PRODUCE, 9, now, 3000, tenant="acme"))

    # Exported as the live tenant level is, labelled by the tenant, and shown on its row.
    runtime.last_now_ms = NOW + 9_000
    runtime.tick(NOW + 9_000)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    text = generate_latest(registry).decode()
    assert 'quotagate_shadow_tenant_produce_quota{tenant="acme"} 1000.0' in text
    assert 'quotagate_shadow_tenant_would_throttle_ratio{tenant="acme"}' in text
    assert 'quotagate_tenant_produce_quota{tenant="acme"}' not in text  # no live quota
    (row,) = [r for r in parse([Scrape("u", text)]).rows if r.kind.tenant]
    assert (row.entity, row.shadow_quota) == ("tenant=acme", 1000.0)
    assert row.shadow_ratio is not None and row.shadow_ratio > 0.5


def test_a_strict_shadow_mutation_quota_counts_the_topics_it_would_refuse() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "ops"}, "shadow.controller_mutation_rate", 1.0)], "t", "t"
    )
    shadow = runtime.response_throttle.shadow
    assert shadow is not None
    # CreateTopics v6 is strict: with a burst of 11 (1/s x 11 windows) four topics of five
    # partitions pass until the bucket is negative, and the fourth is refused.
    facts = RequestFacts(
        classify(CREATE_TOPICS, 6), "", "ops", CREATE_TOPICS, 6, NOW, 100, -1, (5, 5, 5, 5)
    )
    assert shadow.observe(facts) > 0
    runtime.last_now_ms = NOW
    runtime.tick(NOW)
    series = runtime.snapshot["series"]
    assert series["shadow_refused_mutations"] == [(["", "ops"], 1.0)]
    assert series["shadow_refused_requests"] == [(["", "ops"], 1.0)]


@pytest.mark.integration
def test_a_fleet_store_shares_the_shadow_set_and_the_cli_sets_and_promotes_it(
    quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path, wait_for: Any
) -> None:
    topic = f"_quotagate.shadow-{uuid.uuid4().hex[:8]}.config"
    quotas = {"super.users": ["User:ANONYMOUS"]}
    first = start_quota_gateway(quota_tansu.bootstrap, quotas=quotas, store_topic=topic)
    second = start_quota_gateway(
        quota_tansu.bootstrap, quotas=quotas, store_topic=topic, store=tmp_path / "other.db"
    )
    entity = ["--entity-type", "users", "--entity-name", "alice"]
    set_shadow = runner.invoke(
        app,
        ["quotas", "alter", "-b", first.bootstrap, *entity, "--shadow", "--add-config",
         "producer_byte_rate=2048,request_percentage=20"],
    )  # fmt: skip
    assert set_shadow.exit_code == 0, set_shadow.output
    wait_for(lambda: second.runtime.response_throttle.shadow is not None, 10, "shadow on second")
    assert not second.runtime.managers.produce.quotas_enabled

    # Quotas as code describe live quotas: --prune leaves a candidate being watched alone.
    quota_file = tmp_path / "quotas.toml"
    quota_file.write_text('[[quota]]\nuser = "bob"\nproducer_byte_rate = 1024\n')
    applied = runner.invoke(
        app, ["quotas", "apply", str(quota_file), "-b", first.bootstrap, "--prune"]
    )
    assert applied.exit_code == 0, applied.output
    described = runner.invoke(app, ["quotas", "describe", "-b", second.bootstrap, *entity])
    assert "shadow.producer_byte_rate=2048" in described.output, described.output

    promoted = runner.invoke(app, ["quotas", "promote", "-b", second.bootstrap, *entity])
    assert promoted.exit_code == 0, promoted.output
    live = {"producer_byte_rate": 2048.0, "request_percentage": 20.0}
    wait_for(
        lambda: first.runtime.store_sync.client_quotas.get((("user", "alice"),)) == live,
        10,
        "the promoted values, and no shadow ones, on the other gateway",
        lambda: str(first.runtime.store_sync.client_quotas),
    )
    assert first.runtime.response_throttle.shadow is None
    assert first.runtime.managers.request.quota_applies("alice", "any")

    # Nothing left to promote: a usage error saying how to set a shadow quota.
    again = runner.invoke(app, ["quotas", "promote", "-b", first.bootstrap, *entity])
    assert again.exit_code == 2
    assert "no shadow quotas to promote" in again.output
