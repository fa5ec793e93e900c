"""One worker's account of its fleet: what it tells its peers, and what they used.

Every exchange interval the worker calls :meth:`FleetLedger.report` and publishes the
result; every report that arrives (its own included) goes to :meth:`FleetLedger.absorb`,
which records the peer's new usage into this worker's own Kafka-exact sensors. Kafka's
throttle formula then runs unchanged on the fleet's usage, and no clock is compared between
machines: a peer's usage is recorded at the receiver's time of arrival.

Liveness, checked by :meth:`FleetLedger.tick` every interval:

* the exchange is *healthy* while this worker reads its own reports back within
  ``silence_ms`` of publishing them; later than that, what it hears is too old to act on;
* a peer not heard from for ``silence_ms``, or any peer while the exchange is unhealthy
  (unless it is heard directly, through the instance's hub), is *silent*: for every key it
  carried, this worker records on its behalf the key's quota divided by the number of
  members, as if it used its fair share (never "fully open": a silent peer may still be
  serving clients), and scales its own throttles on that key to the share the live members
  are left with;
* what was filled in stands in for the peer's usage, not beside it: when its reports arrive
  after all (it was only slow, or this worker was), the fill-in is deducted from them, so a
  slow peer is not counted twice;
* a peer is *forgotten* only on positive evidence that it is gone: it said farewell (its
  process ended), or it stayed silent for a whole ``forget_ms`` while this worker heard its
  own reports the whole time. Silence while the exchange itself was unhealthy proves nothing
  (the peer may be serving clients and simply not heard), so every loss of the exchange,
  however short, restarts that clock: a flapping exchange keeps the fair-share fallback on
  instead of forgetting everyone at the first echo and opening to the full quota;
* a newer incarnation of a member replaces the older one at once (a restarted worker).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from quotagate.quota.fleet_report import FleetReport, Key, UsageEntry
from quotagate.quota.fleet_shares import SharedQuota

UsageKey = tuple[str, Key]
"""(kind, key)"""

_SENT_KEPT = 4096
"""Publication times kept for reports not read back yet (a lost exchange loses them all)."""


class PeerState(enum.StrEnum):
    LIVE = "live"
    SILENT = "silent"


@dataclass(slots=True)
class _Peer:
    incarnation: str
    last_heard_ms: int
    state: PeerState = PeerState.LIVE
    seq: int = 0
    """The newest report of this incarnation absorbed; an older one arriving late (from
    another path or another topic of the rolled log) carries nothing new."""
    heard_locally_ms: int = -(2**62)
    """When its last report came through the instance's hub: a peer on the same host is
    heard at once whatever the upstream does."""
    filled_until_ms: int = 0
    """The fair-share fallback has been recorded up to here while silent."""
    baselines: dict[UsageKey, float] = field(default_factory=dict)
    """The peer's cumulative usage as last seen, per key."""
    carried: dict[UsageKey, int] = field(default_factory=dict)
    """When the peer last reported usage of a key (receiver time)."""
    advanced: dict[UsageKey, float] = field(default_factory=dict)
    """Fair shares recorded on the peer's behalf that none of its reports has covered yet."""


@dataclass(slots=True)
class _Counted:
    counter: object
    seen: float
    cumulative: float


@dataclass(frozen=True, slots=True)
class LedgerEvents:
    """What changed at a tick, for log lines and metrics."""

    silenced: tuple[str, ...] = ()
    forgotten: tuple[str, ...] = ()
    lost: bool = False
    """The exchange became unhealthy at this tick (own reports not read back)."""
    restored: bool = False
    """The exchange became healthy again since the previous tick."""


@dataclass(frozen=True, slots=True)
class MemberView:
    member: str
    incarnation: str
    state: PeerState


class FleetLedger:
    def __init__(
        self,
        member: str,
        incarnation: str,
        shares: Sequence[SharedQuota],
        *,
        silence_ms: int,
        forget_ms: int,
        now_ms: int,
    ) -> None:
        if not 0 < silence_ms < forget_ms:
            raise ValueError("need 0 < silence_ms < forget_ms")
        self.member = member
        self.incarnation = incarnation
        self.silence_ms = silence_ms
        self.forget_ms = forget_ms
        self._shares = {share.kind: share for share in shares}
        self.key_arity = {share.kind: share.key_arity for share in shares}
        self._counted: dict[UsageKey, _Counted] = {}
        self._peers: dict[str, _Peer] = {}
        self._seq = 0
        self._next_prune_ms = now_ms + forget_ms // 2
        self.last_echo_ms = now_ms
        """When this worker last read one of its own reports back."""
        self.last_echo_delay_ms = 0
        """How long that report took from publication to read-back (when known)."""
        self._sent_ms: dict[int, int] = {}
        self._scaling: dict[str, bool] = {}
        self.healthy_since_ms: int | None = now_ms
        """Since when the exchange has been healthy without a break (None: unhealthy now)."""
        self._reported_healthy = True
        self.farewells = 0
        """Peers forgotten because they said farewell (metrics)."""
        self.remote_recorded: dict[str, float] = dict.fromkeys(self._shares, 0.0)
        """Peer usage recorded here, per kind (metrics)."""
        self.fallback_recorded: dict[str, float] = dict.fromkeys(self._shares, 0.0)
        """Fair shares recorded for silent peers, per kind (metrics)."""

    # -- what this worker tells the fleet ------------------------------------------------

    def farewell(self) -> FleetReport:
        """The last report of this incarnation: its final usage, and that it is gone (its
        process is ending), so peers forget it at once rather than filling it in."""
        last = self.report()
        return FleetReport(last.member, last.incarnation, last.seq, last.usage, farewell=True)

    def report(self, now_ms: int | None = None) -> FleetReport:
        """This worker's usage that changed since its previous report (maybe none: the
        report is still sent, it is the worker's heartbeat). ``now_ms``: when it is
        published, so that its read-back tells how late the exchange runs."""
        self._seq += 1
        if now_ms is not None:
            self._sent_ms[self._seq] = now_ms
            if len(self._sent_ms) > _SENT_KEPT:  # echoes stopped coming: keep the newest
                del self._sent_ms[next(iter(self._sent_ms))]
        usage: dict[str, tuple[UsageEntry, ...]] = {}
        live: set[UsageKey] = set()
        for kind, share in self._shares.items():
            entries = []
            for key, counter, total in share.local_totals():
                usage_key = (kind, key)
                live.add(usage_key)
                counted = self._counted.get(usage_key)
                if counted is None:
                    counted = self._counted[usage_key] = _Counted(counter, 0.0, 0.0)
                elif counted.counter is not counter:  # the sensor expired and came back
                    counted.counter, counted.seen = counter, 0.0
                delta = total - counted.seen
                if delta:
                    counted.seen = total
                    counted.cumulative += delta
                    entries.append(UsageEntry(key, counted.cumulative, delta))
            if entries:
                usage[kind] = tuple(entries)
        for gone in self._counted.keys() - live:
            del self._counted[gone]
        return FleetReport(self.member, self.incarnation, self._seq, usage)

    # -- what the fleet tells this worker ------------------------------------------------

    def absorb(self, report: FleetReport, now_ms: int, *, local: bool = False) -> None:
        """Record a peer's new usage here (at ``now_ms``); one's own report is an echo.
        ``local``: it came through the instance's hub, not the upstream."""
        if report.member == self.member and report.incarnation == self.incarnation:
            self._echo(report.seq, now_ms)
            return
        peer = self._peer_for(report, now_ms)
        if peer is None:
            return
        if local:
            peer.heard_locally_ms = now_ms
        if report.seq <= peer.seq:
            peer.last_heard_ms = max(peer.last_heard_ms, now_ms)
            return
        peer.seq = report.seq
        if report.farewell:
            self._record_usage(peer, report, now_ms)
            if self._peers.get(report.member) is peer:
                del self._peers[report.member]
                self.farewells += 1
            return
        peer.last_heard_ms = now_ms
        if local or self.exchange_healthy(now_ms):
            peer.state = PeerState.LIVE
        self._record_usage(peer, report, now_ms)

    def _echo(self, seq: int, now_ms: int) -> None:
        sent = self._sent_ms.pop(seq, None)
        for old in [s for s in self._sent_ms if s < seq]:  # lost on the way: never coming
            del self._sent_ms[old]
        if sent is not None:
            self.last_echo_delay_ms = now_ms - sent
        gap_ms = now_ms - self.last_echo_ms
        self.last_echo_ms = now_ms
        if self.last_echo_delay_ms > self.silence_ms:
            self.healthy_since_ms = None
        elif self.healthy_since_ms is None or gap_ms > self.silence_ms:
            # A gap longer than the silence limit was a loss, even if no tick saw it: the
            # clock of continuous health starts again from this echo.
            self.healthy_since_ms = now_ms

    def _record_usage(self, peer: _Peer, report: FleetReport, now_ms: int) -> None:
        if peer.advanced and now_ms - peer.filled_until_ms > self.forget_ms:
            # Fill-ins older than the quota window have left every sample: nothing to settle.
            peer.advanced.clear()
        for kind, entries in report.usage.items():
            share = self._shares.get(kind)
            if share is None:
                continue
            for entry in entries:
                usage_key = (kind, entry.key)
                baseline = peer.baselines.get(usage_key)
                amount = entry.delta if baseline is None else entry.cumulative - baseline
                peer.baselines[usage_key] = entry.cumulative
                peer.carried[usage_key] = now_ms
                amount = _settle(peer.advanced, usage_key, amount)
                if amount:
                    share.record_remote(entry.key, amount, now_ms)
                    self.remote_recorded[kind] += amount

    def _peer_for(self, report: FleetReport, now_ms: int) -> _Peer | None:
        """The peer's view; a newer incarnation replaces an older one, an older is ignored
        for liveness but its usage still counts (it was used), via a throwaway view."""
        if report.member == self.member:
            # An earlier life of this very worker, read back while catching up.
            if _older(report.incarnation, self.incarnation):
                return _Peer(report.incarnation, now_ms)
            return None
        peer = self._peers.get(report.member)
        if peer is None or _older(peer.incarnation, report.incarnation):
            peer = self._peers[report.member] = _Peer(report.incarnation, now_ms)
        elif peer.incarnation != report.incarnation:
            return _Peer(report.incarnation, now_ms)
        return peer

    # -- liveness --------------------------------------------------------------------------

    def exchange_healthy(self, now_ms: int) -> bool:
        """False while this worker's own reports do not come back, or come back later than
        the silence limit: what it hears of its peers is then too old to act on."""
        return (
            now_ms - self.last_echo_ms <= self.silence_ms
            and self.last_echo_delay_ms <= self.silence_ms
        )

    def tick(self, now_ms: int) -> LedgerEvents:
        """Mark silent peers, record their fair share, forget the long gone."""
        healthy = self.exchange_healthy(now_ms)
        if not healthy:
            self.healthy_since_ms = None
        lost = self._reported_healthy and not healthy
        restored = healthy and not self._reported_healthy
        self._reported_healthy = healthy
        # Silence counts as evidence only from the start of the current healthy stretch.
        evidence_from = self.healthy_since_ms
        prune = now_ms >= self._next_prune_ms
        if prune:
            self._next_prune_ms = now_ms + self.forget_ms // 2
        silenced: list[str] = []
        forgotten: list[str] = []
        for member, peer in list(self._peers.items()):
            quiet_ms = now_ms - peer.last_heard_ms
            if (
                evidence_from is not None
                and now_ms - max(peer.last_heard_ms, evidence_from) > self.forget_ms
            ):
                del self._peers[member]
                forgotten.append(member)
                continue
            direct = now_ms - peer.heard_locally_ms <= self.silence_ms
            late = not healthy and not direct  # only the upstream could tell, and it is late
            if peer.state is PeerState.LIVE and (quiet_ms > self.silence_ms or late):
                # Its reports cover its usage until about one exchange delay before they
                # were heard: the fair share fills in from there.
                peer.state = PeerState.SILENT
                lag_ms = self.last_echo_delay_ms if quiet_ms <= self.silence_ms else 0
                peer.filled_until_ms = peer.last_heard_ms - lag_ms
                silenced.append(member)
            elif prune and peer.state is PeerState.LIVE:
                # A silent peer keeps what it carried: its fallback must not lapse.
                self._prune(peer, now_ms)
        members = 1 + len(self._peers)
        assumed: dict[UsageKey, int] = {}
        for peer in self._peers.values():
            if peer.state is PeerState.SILENT:
                for usage_key in self._fill_in(peer, members, now_ms):
                    assumed[usage_key] = assumed.get(usage_key, 0) + 1
        self._scale_throttles(assumed, members)
        return LedgerEvents(tuple(silenced), tuple(forgotten), lost, restored)

    def _fill_in(self, peer: _Peer, members: int, now_ms: int) -> list[UsageKey]:
        """Record ``quota / members`` per second, since last time, for each key it carried;
        return those keys."""
        elapsed_s = (now_ms - peer.filled_until_ms) / 1000
        peer.filled_until_ms = max(peer.filled_until_ms, now_ms)
        filled = []
        for kind, key in self._carried_at_silence(peer):
            share = self._shares[kind]
            limit = share.limit(key)
            if limit is None:
                continue
            filled.append((kind, key))
            if elapsed_s <= 0:
                continue
            amount = limit / members * elapsed_s
            share.record_remote(key, amount, now_ms)
            self.fallback_recorded[kind] += amount
            peer.advanced[(kind, key)] = peer.advanced.get((kind, key), 0.0) + amount
        return filled

    def _scale_throttles(self, assumed: dict[UsageKey, int], members: int) -> None:
        """Where ``s`` of ``members`` are silent, the assumed part of a key's rate is a
        constant: only what this worker and its live peers do moves the rate. Kafka's
        throttle ``(O - Q) / Q * W`` then undershoots by ``members / (members - s)``, the
        throttle a process would get with the quota share the live ones are left with."""
        scales: dict[str, dict[Key, float]] = {kind: {} for kind in self._shares}
        for (kind, key), silent in assumed.items():
            scales[kind][key] = members / (members - silent)
        for kind, share in self._shares.items():
            if scales[kind] or self._scaling.get(kind):
                share.scale_throttles(scales[kind])
            self._scaling[kind] = bool(scales[kind])

    def _carried_at_silence(self, peer: _Peer) -> Iterable[UsageKey]:
        # Keys the peer used within the quota window before it fell silent, judged from its
        # last word rather than from now: a long silence must not let the fallback lapse.
        since = peer.last_heard_ms - self.forget_ms
        return [usage_key for usage_key, at in peer.carried.items() if at >= since]

    def _prune(self, peer: _Peer, now_ms: int) -> None:
        # Without a baseline the next report's own delta is used, which is right whether or
        # not the peer restarted its count meanwhile.
        stale = [k for k, at in peer.carried.items() if now_ms - at > self.forget_ms]
        for usage_key in stale:
            del peer.carried[usage_key]
            peer.baselines.pop(usage_key, None)

    def members(self) -> list[MemberView]:
        """The peers this worker accounts for (itself excluded)."""
        return [
            MemberView(member, peer.incarnation, peer.state)
            for member, peer in sorted(self._peers.items())
        ]


def _settle(advanced: dict[UsageKey, float], usage_key: UsageKey, amount: float) -> float:
    """What is left of a peer's reported ``amount`` once the fair shares recorded for it
    while it was silent are deducted. A fill-in larger than what the peer really used stays
    recorded (it errs towards throttling) and is deducted from its next reports."""
    owed = advanced.pop(usage_key, 0.0)
    if owed > amount:
        advanced[usage_key] = owed - amount
        return 0.0
    return amount - owed


def _older(incarnation: str, other: str) -> bool:
    """Incarnations are ``<start epoch ms>-<random>``: the earlier start is older."""
    return _started_ms(incarnation) < _started_ms(other)


def _started_ms(incarnation: str) -> int:
    head = incarnation.partition("-")[0]
    return int(head) if head.isdigit() else 0
