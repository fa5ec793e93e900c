"""The fleet ledger: peers' usage recorded into one's own sensors, liveness and fallback."""

from __future__ import annotations

import pytest

from quotagate.quota import QuotaManagers, TopicBytesInQuota
from quotagate.quota.fleet_ledger import FleetLedger, PeerState
from quotagate.quota.fleet_report import FleetReport, ReportError, UsageEntry, merged
from quotagate.quota.fleet_shares import PRODUCE, TOPIC_BYTES_IN, shared_quotas

T0 = 1_700_000_000_000
QUOTA = 1000.0  # bytes/s for client "c"
SILENCE, FORGET = 300, 11_000


class Worker:
    def __init__(self, name: str, incarnation: str = f"{T0}-a") -> None:
        self.managers = QuotaManagers.create()
        self.managers.update_quota({"client-id": "c"}, "producer_byte_rate", QUOTA)
        self.topics = TopicBytesInQuota(None, T0)
        self.ledger = FleetLedger(
            name,
            incarnation,
            shared_quotas(self.managers, self.topics),
            silence_ms=SILENCE,
            forget_ms=FORGET,
            now_ms=T0,
        )

    def produce(self, size: float, now_ms: int) -> int:
        return self.managers.produce.record_and_get_throttle_ms("", "c", size, now_ms)

    def rate(self, now_ms: int) -> float:
        metric = self.managers.produce.quota_metric("", "c")
        assert metric is not None
        return metric.peek(now_ms)


def exchange(*workers: Worker, now_ms: int) -> None:
    reports = [w.ledger.report() for w in workers]
    for worker in workers:
        for report in reports:
            worker.ledger.absorb(report, now_ms)


def test_a_peers_usage_counts_as_if_one_process_had_recorded_it() -> None:
    a, b, single = Worker("gw/0"), Worker("gw/1"), Worker("solo/0")
    throttles = []
    for step in range(150):
        now = T0 + step * 100
        a.produce(120, now)
        single.produce(120, now)
        exchange(a, b, now_ms=now)
        throttles.append((b.produce(30, now), single.produce(30, now)))
    assert b.rate(T0 + 15_000) == pytest.approx(single.rate(T0 + 15_000))
    assert all(mine == theirs for mine, theirs in throttles)
    assert throttles[-1][0] > 0, "the fleet-wide rate is over quota: the test can fail"


def test_without_the_exchange_each_worker_sees_only_its_own_usage() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    for step in range(150):
        now = T0 + step * 100
        a.produce(120, now)
        assert b.produce(30, now) == 0


def test_a_report_absorbed_twice_counts_once() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(500, T0)
    report = a.ledger.report()
    b.ledger.absorb(report, T0)
    b.ledger.absorb(report, T0)
    assert b.managers.produce.quota_sensors()[("", "c")].recorded == 0
    assert b.ledger.remote_recorded[PRODUCE] == 500
    a.produce(200, T0 + 100)
    b.ledger.absorb(a.ledger.report(), T0 + 100)
    assert b.ledger.remote_recorded[PRODUCE] == 700


def test_a_late_joiner_takes_the_increase_of_the_first_report_it_sees() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(10_000, T0)
    a.ledger.report()  # read by nobody
    a.produce(300, T0 + 100)
    b.ledger.absorb(a.ledger.report(), T0 + 100)
    assert b.ledger.remote_recorded[PRODUCE] == 300


def test_a_report_carries_only_what_changed_and_cumulative_totals() -> None:
    a = Worker("gw/0")
    a.produce(100, T0)
    first = a.ledger.report()
    assert first.usage[PRODUCE] == (UsageEntry(("", "c"), 100.0, 100.0),)
    assert a.ledger.report().usage == {}
    a.produce(50, T0 + 100)
    assert a.ledger.report().usage[PRODUCE] == (UsageEntry(("", "c"), 150.0, 50.0),)


def test_an_expired_sensor_does_not_restart_the_cumulative_count() -> None:
    a = Worker("gw/0")
    a.produce(100, T0)
    a.ledger.report()
    later = T0 + 3_600_001 + 1
    assert a.managers.produce.expire_sensors(later) == [("", "c")]
    a.produce(40, later)
    assert a.ledger.report().usage[PRODUCE] == (UsageEntry(("", "c"), 140.0, 40.0),)


def test_a_silent_peer_is_assumed_to_use_its_fair_share() -> None:
    a, b, c = Worker("gw/0"), Worker("gw/1"), Worker("gw/2")
    a.produce(100, T0)
    exchange(a, b, c, now_ms=T0)
    exchange(b, c, now_ms=T0 + 200)  # a says nothing from here on
    assert b.ledger.tick(T0 + 300).silenced == ()
    events = b.ledger.tick(T0 + 301)
    assert events.silenced == ("gw/0",)
    assert {m.member: m.state for m in b.ledger.members()}["gw/0"] is PeerState.SILENT
    before = b.ledger.fallback_recorded[PRODUCE]
    assert before == pytest.approx(QUOTA / 3 * 0.301)  # backdated to its last word
    b.ledger.tick(T0 + 1301)
    assert b.ledger.fallback_recorded[PRODUCE] - before == pytest.approx(QUOTA / 3)


def test_a_peer_heard_again_is_live_and_no_longer_filled_in() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(100, T0)
    exchange(a, b, now_ms=T0)
    b.ledger.tick(T0 + 400)
    b.ledger.absorb(b.ledger.report(T0 + 440), T0 + 445)  # b hears itself again, promptly
    b.ledger.absorb(a.ledger.report(), T0 + 450)
    filled = b.ledger.fallback_recorded[PRODUCE]
    b.ledger.tick(T0 + 500)
    assert b.ledger.fallback_recorded[PRODUCE] == filled
    assert b.ledger.members()[0].state is PeerState.LIVE


def test_a_silent_peer_is_forgotten_after_the_quota_window_while_one_hears_oneself() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    exchange(a, b, now_ms=T0)
    now = T0
    while now < T0 + FORGET:
        now += 100
        b.ledger.absorb(b.ledger.report(), now)  # b's own reports come back
        assert b.ledger.tick(now).forgotten == ()
    b.ledger.absorb(b.ledger.report(), now + 100)
    assert b.ledger.tick(now + 100).forgotten == ("gw/0",)
    assert b.ledger.members() == []


def test_a_worker_that_hears_nobody_never_forgets_and_never_opens() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(100, T0)
    exchange(a, b, now_ms=T0)
    assert not b.ledger.exchange_healthy(T0 + 60_000)
    assert b.ledger.tick(T0 + 60_000).forgotten == ()
    before = b.ledger.fallback_recorded[PRODUCE]
    b.ledger.tick(T0 + 61_000)
    assert b.ledger.fallback_recorded[PRODUCE] - before == pytest.approx(QUOTA / 2)


def test_a_restarted_peer_replaces_its_earlier_incarnation() -> None:
    old, b = Worker("gw/0", f"{T0}-old"), Worker("gw/1")
    old.produce(100, T0)
    exchange(old, b, now_ms=T0)
    new = Worker("gw/0", f"{T0 + 5000}-new")
    new.produce(70, T0 + 5000)
    b.ledger.absorb(new.ledger.report(), T0 + 5000)
    assert [(m.member, m.incarnation) for m in b.ledger.members()] == [("gw/0", f"{T0 + 5000}-new")]
    assert b.ledger.remote_recorded[PRODUCE] == 170


def test_a_restarted_worker_counts_what_its_earlier_life_used() -> None:
    old = Worker("gw/0", f"{T0}-old")
    old.produce(400, T0)
    history = old.ledger.report()
    new = Worker("gw/0", f"{T0 + 2000}-new")
    new.ledger.absorb(history, T0 + 2000)
    assert new.ledger.remote_recorded[PRODUCE] == 400
    assert new.ledger.members() == []


def test_topic_bytes_are_shared_per_topic() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.topics.record_accepted("orders", 4096, T0)
    b.ledger.absorb(a.ledger.report(), T0)
    assert b.ledger.remote_recorded[TOPIC_BYTES_IN] == 4096
    assert b.topics.topic_meters["orders"].count == 4096
    assert b.topics.accepted == {}


def test_reports_round_trip_and_bad_ones_are_refused() -> None:
    a = Worker("gw/0")
    a.produce(12.5, T0)
    a.topics.record_accepted("t", 3, T0)
    report = a.ledger.report()
    assert FleetReport.decode(report.encode(), a.ledger.key_arity) == report
    for bad in (
        b"",
        b"[]",
        b'{"v":2}',
        b'{"v":1,"member":"","inc":"1-a","seq":1}',
        b'{"v":1,"member":"m","inc":"1-a","seq":"1"}',
        b'{"v":1,"member":"m","inc":"1-a","seq":1,"usage":{"produce":[["c",1,1]]}}',
        b'{"v":1,"member":"m","inc":"1-a","seq":1,"usage":{"produce":[["u","c",1e999,1]]}}',
    ):
        with pytest.raises(ReportError):
            FleetReport.decode(bad, a.ledger.key_arity)
    unknown_kind = b'{"v":1,"member":"m","inc":"1-a","seq":1,"usage":{"later":[[1]]}}'
    assert FleetReport.decode(unknown_kind, a.ledger.key_arity).usage == {}


def test_a_slow_peer_is_not_counted_twice_when_its_reports_arrive() -> None:
    # b fills in a's fair share while a is silent; then a's report arrives with what a really
    # used over that time. The fill-in stood in for it: b ends with what a used, not both.
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(100, T0)
    exchange(a, b, now_ms=T0)
    b.ledger.tick(T0 + 1000)  # silent since T0: QUOTA / 2 per second filled in for a second
    filled = b.ledger.fallback_recorded[PRODUCE]
    assert filled == pytest.approx(QUOTA / 2)
    a.produce(800, T0 + 900)
    b.ledger.absorb(a.ledger.report(), T0 + 1050)
    assert b.ledger.remote_recorded[PRODUCE] == pytest.approx(100 + 800 - filled)
    assert b.ledger.remote_recorded[PRODUCE] + filled == pytest.approx(100 + 800)


def test_a_fill_in_larger_than_the_peers_usage_is_deducted_from_its_next_reports() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(100, T0)
    exchange(a, b, now_ms=T0)
    b.ledger.tick(T0 + 1000)  # 500 filled in
    a.produce(200, T0 + 900)
    b.ledger.absorb(a.ledger.report(), T0 + 1050)  # 200 of the 500 settled
    a.produce(400, T0 + 1100)
    b.ledger.absorb(a.ledger.report(), T0 + 1150)  # the other 300, and 100 recorded
    assert b.ledger.remote_recorded[PRODUCE] == pytest.approx(100 + 100)
    a.produce(50, T0 + 1200)
    b.ledger.absorb(a.ledger.report(), T0 + 1250)
    assert b.ledger.remote_recorded[PRODUCE] == pytest.approx(100 + 100 + 50)


def _hear_self(worker: Worker, sent_ms: int, read_ms: int) -> None:
    worker.ledger.absorb(worker.ledger.report(sent_ms), read_ms)


def test_silence_counts_only_from_the_last_time_the_exchange_became_healthy() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    exchange(a, b, now_ms=T0)
    now = T0
    # b hears itself, but every 2 s its echo comes 0.5 s late: a flapping exchange. Peer a
    # stays quiet far longer than the forget time and is never forgotten.
    while now < T0 + 3 * FORGET:
        now += 100
        late = (now - T0) % 2_000 == 0
        _hear_self(b, now - (500 if late else 5), now)
        assert b.ledger.tick(now).forgotten == ()
    assert [m.member for m in b.ledger.members()] == ["gw/0"]
    # Once the exchange holds for a whole forget time, the silence is evidence.
    start, forgotten_at = now, []
    while now <= start + FORGET + 200:
        now += 100
        _hear_self(b, now - 5, now)
        if b.ledger.tick(now).forgotten == ("gw/0",):
            forgotten_at.append(now - start)
    healthy_since = start - (start - T0) % 2_000 + 100  # the echo after the last late one
    assert forgotten_at == [healthy_since + FORGET + 100 - start]


def test_a_gap_between_echoes_longer_than_the_silence_limit_is_a_loss_even_between_ticks() -> None:
    b = Worker("gw/1")
    _hear_self(b, T0 + 95, T0 + 100)
    assert b.ledger.healthy_since_ms == T0
    _hear_self(b, T0 + 495, T0 + 500)  # 400 ms after the previous echo: no tick saw it
    assert b.ledger.healthy_since_ms == T0 + 500


def test_a_late_echo_makes_the_exchange_unhealthy_and_the_peers_silent() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(100, T0)
    exchange(a, b, now_ms=T0)
    _hear_self(b, T0 + 100, T0 + 100 + SILENCE + 1)  # heard, but too late to act on
    events = b.ledger.tick(T0 + 500)
    assert not b.ledger.exchange_healthy(T0 + 500)
    assert events.lost and events.silenced == ("gw/0",)
    b.ledger.absorb(a.ledger.report(), T0 + 550)  # a's reports arriving do not make it live
    assert b.ledger.members()[0].state is PeerState.SILENT
    _hear_self(b, T0 + 600, T0 + 605)
    assert b.ledger.tick(T0 + 610).restored


def test_a_farewell_counts_the_last_usage_and_forgets_at_once() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    exchange(a, b, now_ms=T0)
    a.produce(250, T0 + 50)
    b.ledger.absorb(a.ledger.farewell(), T0 + 60)
    assert b.ledger.members() == []
    assert b.ledger.remote_recorded[PRODUCE] == 250
    assert b.ledger.farewells == 1


def test_a_farewell_of_an_earlier_life_leaves_the_newer_one() -> None:
    old, new, b = Worker("gw/0", f"{T0}-old"), Worker("gw/0", f"{T0 + 9}-new"), Worker("gw/1")
    b.ledger.absorb(new.ledger.report(), T0 + 10)
    b.ledger.absorb(old.ledger.farewell(), T0 + 20)
    assert [m.incarnation for m in b.ledger.members()] == [f"{T0 + 9}-new"]


def test_a_report_older_than_the_newest_absorbed_adds_nothing() -> None:
    a, b = Worker("gw/0"), Worker("gw/1")
    a.produce(100, T0)
    first = a.ledger.report()
    a.produce(50, T0 + 10)
    second = a.ledger.report()
    b.ledger.absorb(second, T0 + 20)  # the hub's copy of the newer one comes first
    b.ledger.absorb(first, T0 + 30)  # then the upstream's, late
    assert b.ledger.remote_recorded[PRODUCE] == 50  # no baseline yet: second's own increase
    a.produce(25, T0 + 40)
    b.ledger.absorb(a.ledger.report(), T0 + 50)
    assert b.ledger.remote_recorded[PRODUCE] == 75


def test_merged_reports_count_as_their_parts() -> None:
    a, b, c = Worker("gw/0"), Worker("gw/1"), Worker("gw/2")
    reports = []
    for step, size in enumerate((100, 0, 40, 60)):
        if size:
            a.produce(size, T0 + step)
        reports.append(a.ledger.report())
    for report in reports:
        b.ledger.absorb(report, T0 + 10)
    c.ledger.absorb(merged(reports), T0 + 10)
    assert c.ledger.remote_recorded == b.ledger.remote_recorded
    assert merged(reports).seq == reports[-1].seq


def test_throttles_scale_by_the_share_left_to_the_live_while_peers_are_assumed() -> None:
    workers = [Worker(f"gw/{i}") for i in range(4)]
    for w in workers:
        w.produce(100, T0)
    exchange(*workers, now_ms=T0)
    b = workers[1]
    _hear_self(b, T0 + 395, T0 + 400)
    workers[2].produce(1, T0 + 390)
    b.ledger.absorb(workers[2].ledger.report(), T0 + 400)  # gw/2 live, gw/0 and gw/3 silent
    b.ledger.tick(T0 + 400)
    assert b.managers.produce.fallback_scale == {("", "c"): 4 / 2}
    for peer in (workers[0], workers[3]):
        peer.produce(1, T0 + 450)
        b.ledger.absorb(peer.ledger.report(), T0 + 450)
    _hear_self(b, T0 + 495, T0 + 500)
    b.ledger.tick(T0 + 500)
    assert b.managers.produce.fallback_scale == {}


def test_a_peer_heard_through_the_hub_stays_live_while_the_upstream_is_late() -> None:
    local, remote, b = Worker("gw-a/0"), Worker("gw-b/0"), Worker("gw-a/1")
    exchange(local, remote, b, now_ms=T0)
    _hear_self(b, T0 + 100, T0 + 100 + SILENCE + 1)  # the upstream runs late
    b.ledger.absorb(local.ledger.report(), T0 + 450, local=True)
    b.ledger.absorb(remote.ledger.report(), T0 + 450)
    b.ledger.tick(T0 + 500)
    states = {m.member: m.state for m in b.ledger.members()}
    assert states == {"gw-a/0": PeerState.LIVE, "gw-b/0": PeerState.SILENT}
    assert b.managers.produce.fallback_scale == {}  # nothing carried yet: nothing assumed
