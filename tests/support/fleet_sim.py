"""A fleet simulated to the millisecond: real ledgers and quota managers, a usage log whose
delivery the test controls (delays, drops, stalls, flaps), and greedy clients muted the
KIP-219 way. Nothing here touches a socket or a clock: time is a loop variable.

The log is one partition, as the usage topic is: a record is either appended or lost for
everyone, and records are read in the order they were appended, each reader when its
delivery time has come (a record stuck behind a slow one waits for it, as in Kafka).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from quotagate.quota import QuotaManagers, RequestFacts, TopicBytesInQuota, admit, classify
from quotagate.quota.fleet_ledger import FleetLedger
from quotagate.quota.fleet_report import FleetReport, merged
from quotagate.quota.fleet_shares import shared_quotas

T0 = 1_700_000_000_000
STEP_MS = 10
INTERVAL_MS = 100
SILENCE_MS = 3 * INTERVAL_MS
FORGET_MS = 11_000
"""With Kafka's default windows (11 x 1 s)."""
QUOTA = 100_000.0
"""producer_byte_rate of the one client, bytes/s."""
REQUEST_BYTES = 4_000
MEMBERS = 5
"""A tenant's principals (``member-0`` ...), its connections dealt among them in turn."""
_PRODUCE = classify(0, 9, acks=1)

Delivery = Callable[[str, int], int | None]
"""(sender, publish time) → delay until readers see the record, or None: the record is lost."""


def healthy(_sender: str, _now_ms: int) -> int | None:
    return 5


@dataclass(frozen=True)
class Load:
    """A client offering ``offered`` times the quota over ``connections``, each connection
    buffering at most ``buffer_bytes`` (the live benchmarks' producers)."""

    offered: float
    connections: int
    buffer_bytes: int = 64 * 1024

    @property
    def per_step(self) -> float:
        return self.offered * QUOTA / self.connections * STEP_MS / 1000


@dataclass
class _Record:
    sender: str
    due_ms: int
    report: bytes


@dataclass
class SimWorker:
    name: str
    connections: int
    managers: QuotaManagers = field(default_factory=QuotaManagers.create)
    ledger: FleetLedger | None = None
    muted_until: list[int] = field(default_factory=list)
    queued: list[deque[float]] = field(default_factory=list)
    buffered: list[float] = field(default_factory=list)
    read: int = 0
    """How far along the log this worker has read."""
    unpublished: list[FleetReport] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    tenant: str = ""
    """The client is a tenant's members (its quota the tenant's), "" for client ``c``."""
    request_bytes: int = REQUEST_BYTES
    """What a greedy connection sends each time it is not muted."""

    def join(self, now_ms: int) -> None:
        entity = {"tenant": self.tenant} if self.tenant else {"client-id": "c"}
        self.managers.update_quota(entity, "producer_byte_rate", QUOTA)
        self.ledger = FleetLedger(
            self.name,
            f"{T0}-{self.name}",
            shared_quotas(self.managers, TopicBytesInQuota(None, now_ms)),
            silence_ms=SILENCE_MS,
            # As the gateway does: a silent peer's usage has left every window after this.
            forget_ms=self.managers.produce.window_num * self.managers.produce.window_size_s * 1000,
            now_ms=now_ms,
        )
        self.muted_until = [0] * self.connections
        self.queued = [deque() for _ in range(self.connections)]
        self.buffered = [0.0] * self.connections

    def serve(self, now_ms: int, load: Load | None = None) -> int:
        """Every unmuted connection sends one request; returns the bytes admitted. Greedy
        (:attr:`request_bytes` each time) without a ``load``. With one, as a librdkafka producer
        does: a batch of what the client handed over is made every step (its linger) and
        queued, up to the buffer (the client's further records are refused, BufferError);
        the gateway reads the oldest queued request when the connection is not muted."""
        admitted = 0
        for i, until in enumerate(self.muted_until):
            size = self.request_bytes
            if load is not None:
                queue = self.queued[i]
                if self.buffered[i] + load.per_step <= load.buffer_bytes:
                    queue.append(load.per_step)
                    self.buffered[i] += load.per_step
                if until > now_ms or not queue:
                    continue
                size = queue.popleft()
                self.buffered[i] -= size
            elif until > now_ms:
                continue
            throttle = self._charge(i, size, now_ms)
            admitted += size
            self.muted_until[i] = now_ms + throttle
        return int(admitted)

    def _charge(self, connection: int, size: float, now_ms: int) -> int:
        if not self.tenant:
            return self.managers.produce.record_and_get_throttle_ms("", "c", size, now_ms)
        user = f"member-{connection % MEMBERS}"
        facts = RequestFacts(_PRODUCE, user, "c", 0, 9, now_ms, round(size), tenant=self.tenant)
        return admit(self.managers, facts).throttle_ms


@dataclass
class FleetRun:
    admitted: list[tuple[int, int]] = field(default_factory=list)
    """(time, bytes admitted in that step, whole fleet)."""
    forgotten: list[tuple[int, str, str]] = field(default_factory=list)
    """(time, worker, peer forgotten)."""

    def ratio(self, from_ms: int, to_ms: int) -> float:
        """Achieved ÷ quota between two times (relative to the start)."""
        total = sum(b for t, b in self.admitted if T0 + from_ms <= t < T0 + to_ms)
        return total / (QUOTA * (to_ms - from_ms) / 1000)


def run_fleet(
    workers: int,
    connections: int,
    duration_ms: int,
    delivery: Delivery = healthy,
    leave: dict[str, int] | None = None,
    hub_ms: int = 0,
    offered: float | None = None,
    window_num: int = 11,
    tenant: str = "",
    request_bytes: int = REQUEST_BYTES,
) -> FleetRun:
    """``workers`` processes share one client's ``connections`` (spread evenly); ``leave``
    names workers that stop (with a farewell) at a time relative to the start; ``hub_ms``:
    the workers are one instance whose hub relays their reports every ``hub_ms`` (heard
    within the step), 0 for none; ``offered``: the client offers that many times its quota
    (``Load``) instead of sending greedily; ``window_num``: of 1 s each, Kafka's 11 by
    default; ``tenant``: the client is that tenant's members, held by its tenant quota;
    ``request_bytes``: what a greedy connection sends at a time."""
    load = Load(offered, connections) if offered is not None else None
    fleet = [
        SimWorker(
            f"gw/{i}",
            connections // workers + (i < connections % workers),
            QuotaManagers.create(window_num=window_num),
            tenant=tenant,
            request_bytes=request_bytes,
        )
        for i in range(workers)
    ]
    for worker in fleet:
        worker.join(T0)
    log: list[_Record] = []
    run = FleetRun()
    gone: set[str] = set()
    for step in range(duration_ms // STEP_MS):
        now = T0 + step * STEP_MS
        live = [w for w in fleet if w.name not in gone]
        for worker in live:
            _read(worker, log, now, run)
        run.admitted.append((now, sum(w.serve(now, load) for w in live)))
        publish = step % (INTERVAL_MS // STEP_MS) == 0
        if publish:
            for worker in live:
                assert worker.ledger is not None
                events = worker.ledger.tick(now)
                run.forgotten.extend((now, worker.name, peer) for peer in events.forgotten)
        if publish or (hub_ms and step % (hub_ms // STEP_MS) == 0):
            reports = [(w, w.ledger.report(now)) for w in live if w.ledger is not None]
            for worker, report in reports:
                worker.unpublished.append(report)
                if publish:
                    _publish(log, worker.name, merged(worker.unpublished), now, delivery)
                    worker.unpublished.clear()
                if hub_ms:
                    for peer in live:
                        if peer is not worker and peer.ledger is not None:
                            peer.ledger.absorb(report, now, local=True)
        for worker in live:
            if leave and leave.get(worker.name) == now - T0:
                assert worker.ledger is not None
                _publish(log, worker.name, worker.ledger.farewell(), now, delivery)
                gone.add(worker.name)
    return run


def _publish(
    log: list[_Record], sender: str, report: FleetReport, now_ms: int, delivery: Delivery
) -> None:
    delay = delivery(sender, now_ms)
    if delay is None:
        return
    # One partition: a record is not readable before the one appended ahead of it.
    due = max(now_ms + delay, log[-1].due_ms if log else 0)
    log.append(_Record(sender, due, report.encode()))


def _read(worker: SimWorker, log: list[_Record], now_ms: int, run: FleetRun) -> None:
    ledger = worker.ledger
    assert ledger is not None
    while worker.read < len(log) and log[worker.read].due_ms <= now_ms:
        record = log[worker.read]
        worker.read += 1
        ledger.absorb(FleetReport.decode(record.report, ledger.key_arity), now_ms)
