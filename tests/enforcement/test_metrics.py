"""The Prometheus view of the quotas: Kafka's names, peeked so that watching changes nothing."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, generate_latest

from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.quota.controller_mutation import ThrottlingQuotaExceeded
from quotagate.store.quotas import Change


def test_metrics_named_after_kafka_and_expire_with_sensors() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "c"}, "producer_byte_rate", 100.0)], "t", "t"
    )
    now = 1_700_000_000_000
    runtime.managers.produce.record_and_get_throttle_ms("alice", "c", 5000, now)
    runtime.managers.produce.throttle("alice", "c", 1, 40, now)
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "m"}, "controller_mutation_rate", 2.0)], "t", "t"
    )
    runtime.managers.controller.new_strict_quota("bob", "m", now).record(30, now)
    runtime.managers.controller.throttle("bob", "m", 2, 700, now)
    runtime.last_now_ms = now
    runtime.tick(now)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    text = generate_latest(registry).decode()
    assert 'quotagate_produce_byte_rate{client_id="c",user=""} 500.0' in text
    assert 'quotagate_produce_quota{client_id="c",user=""} 100.0' in text
    assert 'quotagate_produce_throttle_time{client_id="c",user=""} 40.0' in text
    assert "quotagate_produce_queue_size 1.0" in text
    assert "quotagate_request_exempt_request_time" in text
    assert 'quotagate_controllermutation_tokens{client_id="m",user=""} -8.0' in text
    assert 'quotagate_controllermutation_quota{client_id="m",user=""} 2.0' in text
    assert 'quotagate_controllermutation_throttle_time{client_id="m",user=""} 700.0' in text
    assert "quotagate_controllermutation_queue_size 1.0" in text
    runtime.tick(now + 3_600_001 + 1)
    later = generate_latest(registry).decode()
    assert 'quotagate_produce_byte_rate{client_id="c"' not in later
    assert "quotagate_produce_queue_size 0.0" in later


def test_idle_rates_decay_in_the_metrics() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "c"}, "producer_byte_rate", 100.0)], "t", "t"
    )
    now = 1_700_000_000_000
    runtime.managers.produce.record_and_get_throttle_ms("alice", "c", 5000, now)
    runtime.last_now_ms = now
    runtime.tick(now + 60_000)  # the client went quiet a minute ago: its windows are gone
    series = dict((tuple(k), v) for k, v in runtime.snapshot["series"]["produce_byte_rate"])
    assert series == {("", "c"): 0.0}


def test_exporting_metrics_never_changes_a_throttle() -> None:
    """Kafka's measure() purges samples and refills buckets; the exporter must only peek, or
    watching the gateway would shift later throttles away from what a replay computes."""

    def run(export: bool) -> list[int]:
        runtime = QuotaRuntime(QuotaSettings())
        runtime.store_sync.alter_client_quotas(
            [
                Change({"client-id": "c"}, "producer_byte_rate", 1000.0),
                Change({"client-id": "c"}, "controller_mutation_rate", 2.0),
            ],
            "t",
            "t",
        )
        start = 1_700_000_000_000
        throttles = []
        for step in range(60):
            now = start + step * 700
            throttles.append(
                runtime.managers.produce.record_and_get_throttle_ms("u", "c", 3000, now)
            )
            quota = runtime.managers.controller.new_strict_quota("u", "c", now)
            try:
                quota.record(5, now)
            except ThrottlingQuotaExceeded as refused:
                throttles.append(-refused.throttle_ms)
            throttles.append(quota.throttle_time(now))
            runtime.last_now_ms = now
            if export:
                runtime.tick(now + 25_000)
        return throttles

    assert run(export=True) == run(export=False)


def test_source_throttle_total_and_connections_per_sharing_key() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [
            Change({"user": None}, "producer_byte_rate", 100.0),
            Change({"user": "bob@corp", "client-id": "c"}, "producer_byte_rate", 50.0),
        ],
        "t",
        "t",
    )
    now = 1_700_000_000_000
    produce = runtime.managers.produce
    produce.record_and_get_throttle_ms("alice", "c", 5000, now)
    produce.record_and_get_throttle_ms("bob@corp", "c", 5000, now)
    produce.throttle("alice", "c", 1, 40, now)
    produce.throttle("alice", "c", 2, 60, now + 10)
    runtime.clients.update({1: ("alice", "c"), 2: ("alice", "other"), 3: ("bob@corp", "c")})
    runtime.last_now_ms = now + 10
    runtime.tick(now + 10)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    text = generate_latest(registry).decode()
    alice = 'client_id="",user="alice"'
    bob = 'client_id="c",user="bob%40corp"'
    assert (
        'quotagate_produce_quota_source{client_id="",source="default-user",user="alice"} 1.0'
        in text
    )
    assert (
        'quotagate_produce_quota_source{client_id="c",source="user+client-id",user="bob%40corp"}'
        " 1.0" in text
    )
    assert re.search(r"# TYPE quotagate_produce_throttle_time_ms(_total)? counter", text)
    assert f"quotagate_produce_throttle_time_ms_total{{{alice}}} 100.0" in text
    assert f"quotagate_produce_throttle_time_ms_total{{{bob}}} 0.0" in text
    # Both of alice's client ids share her user-level key; bob's (user, client) key is his own.
    assert f"quotagate_produce_connections{{{alice}}} 2.0" in text
    assert f"quotagate_produce_connections{{{bob}}} 1.0" in text
    runtime.connection_closed(2)
    runtime.tick(now + 20)
    assert f"quotagate_produce_connections{{{alice}}} 1.0" in generate_latest(registry).decode()
