"""One worker's account of its fleet: what it tells its peers, and what they used.

Every exchange interval the worker calls :meth:`FleetLedger.report` and publishes the
result; every report that arrives (its own included) goes to :meth:`FleetLedger.absorb`,
which records the peer's new usage into this worker's own Kafka-exact sensors. Kafka's
throttle formula then runs unchanged on the fleet's usage, and no clock is compared between
machines: a peer's usage is recorded at the receiver's time of arrival.

Liveness, checked by :meth:`FleetLedger.tick` every interval:

* a peer not heard from for ``silence_ms`` is *silent*: for every key it carried, this
  worker records on its behalf the key's quota divided by the number of members, as if it
  used its fair share (never "fully open": a silent peer may still be serving clients);
* what was filled in stands in for the peer's usage, not beside it: when its reports arrive
  after all (it was only slow, or this worker was), the fill-in is deducted from them, so a
  slow peer is not counted twice;
* a silent peer is *forgotten* after ``forget_ms`` (by then its past usage has left the quota
  window), unless this worker cannot hear its own reports either: then the exchange itself is
  broken, every peer stays silent and the fair-share fallback stays on;
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


class PeerState(enum.StrEnum):
    LIVE = "live"
    SILENT = "silent"


@dataclass(slots=True)
class _Peer:
    incarnation: str
    last_heard_ms: int
    state: PeerState = PeerState.LIVE
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
        self.remote_recorded: dict[str, float] = dict.fromkeys(self._shares, 0.0)
        """Peer usage recorded here, per kind (metrics)."""
        self.fallback_recorded: dict[str, float] = dict.fromkeys(self._shares, 0.0)
        """Fair shares recorded for silent peers, per kind (metrics)."""

    # -- what this worker tells the fleet ------------------------------------------------

    def report(self) -> FleetReport:
        """This worker's usage that changed since its previous report (maybe none: the
        report is still sent, it is the worker's heartbeat)."""
        self._seq += 1
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

    def absorb(self, report: FleetReport, now_ms: int) -> None:
        """Record a peer's new usage here (at ``now_ms``); one's own report is an echo."""
        if report.member == self.member and report.incarnation == self.incarnation:
            self.last_echo_ms = now_ms
            return
        peer = self._peer_for(report, now_ms)
        if peer is None:
            return
        peer.last_heard_ms = now_ms
        peer.state = PeerState.LIVE
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
        """False while this worker's own reports do not come back: it hears nobody."""
        return now_ms - self.last_echo_ms <= self.silence_ms

    def tick(self, now_ms: int) -> LedgerEvents:
        """Mark silent peers, record their fair share, forget the long gone."""
        healthy = self.exchange_healthy(now_ms)
        prune = now_ms >= self._next_prune_ms
        if prune:
            self._next_prune_ms = now_ms + self.forget_ms // 2
        silenced: list[str] = []
        forgotten: list[str] = []
        for member, peer in list(self._peers.items()):
            quiet_ms = now_ms - peer.last_heard_ms
            if healthy and quiet_ms > self.forget_ms:
                del self._peers[member]
                forgotten.append(member)
                continue
            if quiet_ms > self.silence_ms and peer.state is PeerState.LIVE:
                peer.state = PeerState.SILENT
                peer.filled_until_ms = peer.last_heard_ms
                silenced.append(member)
            elif prune:
                self._prune(peer, now_ms)
        members = 1 + len(self._peers)
        for peer in self._peers.values():
            if peer.state is PeerState.SILENT:
                self._fill_in(peer, members, now_ms)
        return LedgerEvents(tuple(silenced), tuple(forgotten))

    def _fill_in(self, peer: _Peer, members: int, now_ms: int) -> None:
        """Record ``quota / members`` per second, since last time, for each key it carried."""
        elapsed_s = (now_ms - peer.filled_until_ms) / 1000
        peer.filled_until_ms = now_ms
        if elapsed_s <= 0:
            return
        for kind, key in self._carried_at_silence(peer):
            share = self._shares[kind]
            limit = share.limit(key)
            if limit is None:
                continue
            amount = limit / members * elapsed_s
            share.record_remote(key, amount, now_ms)
            self.fallback_recorded[kind] += amount
            peer.advanced[(kind, key)] = peer.advanced.get((kind, key), 0.0) + amount

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
