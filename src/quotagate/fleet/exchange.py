"""The fleet's usage exchange: one worker's ledger, wired to the usage topic upstream.

Every ``exchange.interval.ms`` the worker ticks its ledger (silent peers, fallback), then
publishes its report keyed by its member id. Every report read back from the topic (its own
included, which is how it knows it can still hear the fleet) is absorbed into the ledger on
the event loop. At start it reads the last quota window of reports before serving, so a
restarted worker begins with the fleet's recent usage, its own earlier life included.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from quotagate.fleet.settings import FleetSettings
from quotagate.logs import kv
from quotagate.quota.fleet_ledger import FleetLedger
from quotagate.quota.fleet_report import FleetReport, ReportError

log = logging.getLogger(__name__)

Clock = Callable[[], int]
"""Epoch milliseconds, as the quota decisions see them."""

_ECHO_SAMPLES = 1024
_FIRST_ECHO_S = 5.0


class ReportLog(Protocol):
    """A topic the exchange appends to and follows (``fleet.topic_log.TopicLog``)."""

    def start(
        self, on_record: Callable[[bytes | None, bytes | None], None], from_timestamp_ms: int
    ) -> Awaitable[None]:
        """Read from ``from_timestamp_ms`` to the end, then keep following."""
        ...

    def append(self, key: bytes, value: bytes) -> None: ...

    def close(self) -> Awaitable[None]: ...


class FleetExchange:
    def __init__(
        self, ledger: FleetLedger, reports: ReportLog, settings: FleetSettings, clock: Clock
    ) -> None:
        self.ledger = ledger
        self.settings = settings
        self._reports = reports
        self._clock = clock
        self._key = ledger.member.encode()
        self._timer: asyncio.TimerHandle | None = None
        self._sent_ms: dict[int, int] = {}
        self.echo_ms: deque[int] = deque(maxlen=_ECHO_SAMPLES)
        """Publish-to-read-back latency of this worker's recent reports (ms)."""
        self.published = 0
        self.undecodable = 0
        self._echoed = asyncio.Event()

    async def start(self) -> None:
        """Catch up on the fleet's recent reports, then publish one and wait (up to
        ``_FIRST_ECHO_S``) to read it back: from then on, silence means trouble."""
        started = self._clock()
        await self._reports.start(self._on_record, started - self.ledger.forget_ms)
        self._exchange(self._clock())
        try:
            await asyncio.wait_for(self._echoed.wait(), _FIRST_ECHO_S)
        except TimeoutError:
            log.warning(
                kv("fleet_exchange_slow_start", member=self.ledger.member, waited_s=_FIRST_ECHO_S)
            )
        self.ledger.last_echo_ms = max(self.ledger.last_echo_ms, self._clock())
        log.info(
            kv(
                "fleet_exchange_started",
                member=self.ledger.member,
                incarnation=self.ledger.incarnation,
                topic=self.settings.topic,
                interval_ms=self.settings.exchange_interval_ms,
                peers=len(self.ledger.members()),
                caught_up_ms=self._clock() - started,
            )
        )
        self._schedule()

    async def close(self) -> None:
        """Stop reporting; the last report says farewell, so peers forget this worker at
        once instead of filling in its fair share for a quota window."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._reports.append(self._key, self.ledger.farewell().encode())
        await self._reports.close()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.settings.exchange_interval_ms / 1000, self._beat)

    def _beat(self) -> None:
        try:
            self._exchange(self._clock())
        except Exception:
            log.exception("fleet_exchange_failed")
        self._schedule()

    def _exchange(self, now_ms: int) -> None:
        events = self.ledger.tick(now_ms)
        members = len(self.ledger.members()) + 1
        for member in events.silenced:
            log.warning(kv("fleet_peer_silent", member=member, fallback=f"quota/{members} per key"))
        for member in events.forgotten:
            log.info(kv("fleet_peer_forgotten", member=member))
        if events.restored:
            log.info(
                kv(
                    "fleet_exchange_restored",
                    member=self.ledger.member,
                    # Silence counts again only after a whole window of health.
                    forget_after_ms=self.ledger.forget_ms,
                )
            )
        if events.lost:
            log.warning(
                kv(
                    "fleet_exchange_lost",
                    member=self.ledger.member,
                    reason="own reports not read back",
                    fallback=f"quota/{members} per silent peer",
                )
            )
        report = self.ledger.report()
        self._sent_ms[report.seq] = now_ms
        self._reports.append(self._key, report.encode())
        self.published += 1

    def _on_record(self, key: bytes | None, value: bytes | None) -> None:
        if value is None:
            return
        now_ms = self._clock()
        try:
            report = FleetReport.decode(value, self.ledger.key_arity)
        except ReportError as exc:
            self.undecodable += 1
            if self.undecodable == 1 or self.undecodable % 1000 == 0:
                log.warning(
                    kv("fleet_report_skipped", key=key, error=exc, skipped=self.undecodable)
                )
            return
        if report.member == self.ledger.member and report.incarnation == self.ledger.incarnation:
            sent = self._sent_ms.pop(report.seq, None)
            if sent is not None:
                self.echo_ms.append(now_ms - sent)
            self._echoed.set()
            # Reports lost on the way never come back: do not keep their send times.
            for seq in [s for s in self._sent_ms if s < report.seq]:
                del self._sent_ms[seq]
        self.ledger.absorb(report, now_ms)
