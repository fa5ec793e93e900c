"""``quotagate top``'s rows: parsed from real exposition texts of a real quota runtime."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.instance.metrics import merge
from quotagate.quota import Cause, RequestFacts, classify, decide
from quotagate.store.quotas import Change
from quotagate.top.model import Row, Scrape, ThrottleHistory, filter_rows, parse, sort_rows

NOW = 1_700_000_000_000


def _runtime(record: Callable[[QuotaRuntime], None]) -> QuotaRuntime:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [
            Change({"user": None}, "producer_byte_rate", 1000.0),
            Change({"user": "bob@corp", "client-id": "etl"}, "consumer_byte_rate", 500.0),
            Change({"client-id": None}, "request_percentage", 50.0),
        ],
        "t",
        "t",
    )
    record(runtime)
    runtime.last_now_ms = NOW
    runtime.tick(NOW)
    return runtime


def _text(runtime: QuotaRuntime) -> str:
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    return generate_latest(registry).decode()


def _greedy(runtime: QuotaRuntime) -> None:
    produce, fetch = runtime.managers.produce, runtime.managers.fetch
    produce.record_and_get_throttle_ms("alice", "app", 30_000, NOW)  # 3000 B/s over 10 s
    produce.throttle("alice", "app", 1, 250, NOW)
    fetch.record_and_get_throttle_ms("bob@corp", "etl", 1_000, NOW)
    runtime.clients.update({1: ("alice", "app"), 2: ("alice", "other")})


def _by_key(rows: list[Row]) -> dict[tuple[str, str, str], Row]:
    return {row.key: row for row in rows}


def test_one_gateway_one_row_per_sharing_key_and_type() -> None:
    snapshot = parse([Scrape("http://gw/metrics", _text(_runtime(_greedy)))])
    rows = _by_key(snapshot.rows)
    alice = rows["produce", "alice", ""]
    assert (alice.rate, alice.quota) == (3000.0, 1000.0)
    assert alice.over_quota and not alice.throttled  # one scrape does not measure "now"
    assert (alice.throttle_avg_ms, alice.throttle_total_ms) == (250.0, 250.0)
    assert alice.connections == 2  # both client ids share the user-level key
    assert (alice.source, alice.level) == ("default-user", 6)
    assert alice.entity == "user=alice"
    bob = rows["fetch", "bob@corp", "etl"]
    assert bob.entity == "user=bob@corp client-id=etl"  # read as written, not URL-encoded
    assert (bob.rate, bob.quota, bob.source, bob.level) == (100.0, 500.0, "user+client-id", 1)
    assert not bob.over_quota and not bob.throttled
    assert snapshot.errors == [] and snapshot.answered == 1


def test_a_fleet_takes_the_largest_view_and_adds_what_workers_hold() -> None:
    def calm(runtime: QuotaRuntime) -> None:
        runtime.managers.produce.record_and_get_throttle_ms("alice", "app", 10_000, NOW)
        runtime.managers.produce.throttle("alice", "app", 1, 100, NOW)
        runtime.clients.update({7: ("alice", "app")})

    # One instance of two workers (its /metrics merges them, as instance/metrics.py does at
    # each scrape), and a second instance of one worker.
    workers = {0: _text(_runtime(_greedy)), 1: _text(_runtime(calm))}

    class Instance(Collector):
        def collect(self) -> Iterator[Metric]:
            return merge(workers)

    registry = CollectorRegistry()
    registry.register(Instance())
    instance = generate_latest(registry).decode()
    assert 'worker="1"' in instance
    other = _text(_runtime(calm))
    snapshot = parse([Scrape("http://a/metrics", instance), Scrape("http://b/metrics", other)])
    alice = _by_key(snapshot.rows)["produce", "alice", ""]
    assert alice.rate == 3000.0  # the largest view of the key's rate
    assert alice.throttle_avg_ms == 250.0
    assert alice.throttle_total_ms == 250.0 + 100.0 + 100.0  # every worker's throttles
    assert alice.connections == 2 + 1 + 1
    assert snapshot.answered == 2


def test_an_unreachable_endpoint_is_a_line_not_a_failure() -> None:
    snapshot = parse(
        [
            Scrape("http://down/metrics", None, "connection refused"),
            Scrape("http://up/metrics", _text(_runtime(_greedy))),
            Scrape("http://odd/metrics", "this is { not an exposition"),
        ]
    )
    assert snapshot.errors[0] == "http://down/metrics: connection refused"
    assert snapshot.errors[1].startswith("http://odd/metrics: not a Prometheus exposition")
    assert (snapshot.endpoints, snapshot.answered) == (3, 1)
    assert ("produce", "alice", "") in _by_key(snapshot.rows)


def test_throttled_fraction_over_the_window() -> None:
    kind_row = parse([Scrape("u", _text(_runtime(_greedy)))]).rows
    history = ThrottleHistory(window_s=10)

    def at(now_s: float, total_ms: float, connections: int = 1) -> float | None:
        rows = [
            Row(r.kind, r.user, r.client_id, throttle_total_ms=total_ms, connections=connections)
            for r in kind_row
            if r.key == ("produce", "alice", "")
        ]
        return history.update(now_s, rows)[0].throttled_fraction

    assert at(100.0, 0.0) is None  # one scrape: nothing to compare with
    assert at(101.0, 500.0) == pytest.approx(0.5)
    assert at(102.0, 1500.0) == pytest.approx(0.75)  # 1500 ms over the 2 s seen so far
    assert at(112.0, 1500.0) == pytest.approx(0.0)  # the window now starts at 102 s
    assert at(113.0, 3500.0, connections=2) == pytest.approx(2000 / 11_000 / 2)
    assert at(114.0, 10.0) == pytest.approx(0.0)  # a restarted worker's counter starts anew


def test_sort_and_filter() -> None:
    rows = parse([Scrape("u", _text(_runtime(_greedy)))]).rows
    assert [r.key for r in sort_rows(rows, "usage")][:2] == [
        ("produce", "alice", ""),
        ("fetch", "bob@corp", "etl"),
    ]
    assert sort_rows(rows, "connections")[0].key == ("produce", "alice", "")
    assert [r.entity for r in filter_rows(rows, "bob@")] == ["user=bob@corp client-id=etl"]
    assert [r.entity for r in filter_rows(rows, "et*")] == ["user=bob@corp client-id=etl"]
    assert {r.kind.group for r in filter_rows(rows, None, ["mutation", "fetch"])} == {"fetch"}
    with pytest.raises(ValueError, match="unknown sort"):
        sort_rows(rows, "loudness")
    with pytest.raises(ValueError, match="unknown quota type"):
        filter_rows(rows, None, ["bandwidth"])


def test_tenant_rows_and_exempt_principals() -> None:
    """The tenant level's series are rows of their own, keyed by the tenant; a throttle the
    tenant level imposed shows on its row; an exempt principal's rows say so."""

    def tenants(runtime: QuotaRuntime) -> None:
        runtime.store_sync.alter_client_quotas(
            [Change({"tenant": "team"}, "producer_byte_rate", 500.0)], "t", "t"
        )
        runtime.managers.set_exempt_principals(["User:canary"])
        produce = classify(0, 9, acks=1)
        facts = RequestFacts(produce, "carol", "app", 0, 9, NOW, 30_000, tenant="team")
        throttle, cause, _ = decide(runtime.managers, facts)
        assert cause is Cause.TENANT_PRODUCE
        manager = runtime.managers.by_cause(cause)
        assert manager is not None
        manager.throttle("team", "", 1, throttle, NOW)
        canary = RequestFacts(produce, "canary", "probe", 0, 9, NOW, 90_000)
        assert decide(runtime.managers, canary)[0] == 0

    snapshot = parse([Scrape("u", _text(_runtime(tenants)))])
    rows = _by_key(snapshot.rows)
    team = rows["tenant_produce", "team", ""]
    assert (team.entity, team.kind.label) == ("tenant=team", "tenant produce")
    assert (team.rate, team.quota) == (3000.0, 500.0)
    assert team.throttle_total_ms > 0 and team.over_quota
    carol = rows["produce", "carol", ""]  # the default user quota: not throttled, not exempt
    assert carol.throttle_total_ms == 0 and not carol.exempt
    canary = rows["produce", "canary", ""]
    assert canary.exempt and canary.rate == 9000.0 and canary.throttle_total_ms == 0
    assert snapshot.exempt == ["canary"]
    assert [r.key for r in filter_rows(snapshot.rows, "tenant=*")] == [team.key]
