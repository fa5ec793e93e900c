"""The fleet's usage exchange: one worker's ledger, wired to the usage topic upstream and,
in an instance of several workers, to the instance's hub.

Every ``exchange.interval.ms`` the worker ticks its ledger (silent peers, fallback), then
publishes its report keyed by its member id. Every report read back from the topic (its own
included, which is how it knows it can still hear the fleet) is absorbed into the ledger on
the event loop. At start it reads the last quota window of reports before serving, so a
restarted worker begins with the fleet's recent usage, its own earlier life included.

With a hub (local_hub), the worker also reports every ``exchange.local.interval.ms`` to the
other workers of its instance, which hear it at once; what it publishes upstream is then the
merge of its reports since the last publication.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from quotagate.fleet.hub_link import HubLink
from quotagate.fleet.settings import FleetSettings
from quotagate.logs import kv
from quotagate.quota.fleet_ledger import FleetLedger, LedgerEvents
from quotagate.quota.fleet_report import FleetReport, ReportError, merged

log = logging.getLogger(__name__)

Clock = Callable[[], int]
"""Epoch milliseconds, as the quota decisions see them."""

_ECHO_SAMPLES = 1024
_FIRST_ECHO_S = 5.0
_COST_SMOOTHING = 0.2


class ReportLog(Protocol):
    """A topic the exchange appends to and follows (``fleet.rolling_log.RollingTopicLog``)."""

    def start(
        self, on_record: Callable[[bytes | None, bytes | None], None], from_timestamp_ms: int
    ) -> Awaitable[None]:
        """Read from ``from_timestamp_ms`` to the end, then keep following."""
        ...

    def append(self, key: bytes, value: bytes) -> None: ...

    def close(self) -> Awaitable[None]: ...


class FleetExchange:
    def __init__(
        self,
        ledger: FleetLedger,
        reports: ReportLog,
        settings: FleetSettings,
        clock: Clock,
        hub_path: str | None = None,
    ) -> None:
        self.ledger = ledger
        self.settings = settings
        self._reports = reports
        self._clock = clock
        self._key = ledger.member.encode()
        self._timer: asyncio.TimerHandle | None = None
        self.hub = HubLink(hub_path, self._on_hub_report) if hub_path else None
        self._unpublished: list[FleetReport] = []
        self._next_publish_ms = 0
        self._report_cost_ms = 0.0
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
        if self.hub is not None:
            self.hub.start()
        self._beat_at(self._clock())
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
                hub=self.hub.path if self.hub else None,
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
            farewell = self.ledger.farewell()
            if self.hub is not None:
                self.hub.send(farewell.encode())
            self._reports.append(self._key, merged([*self._unpublished, farewell]).encode())
        if self.hub is not None:
            await self.hub.close()
        await self._reports.close()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._period_ms() / 1000, self._beat)

    def _period_ms(self) -> int:
        interval = self.settings.exchange_interval_ms
        if self.hub is None or not self.hub.connected:
            return interval
        # A report walks every live sensor (8.7 ms with 10 000 keys, pure Python): the
        # local pace slows so that reporting never takes more than a tenth of the worker.
        paced = max(self.settings.exchange_local_interval_ms, round(self._report_cost_ms * 10))
        return min(paced, interval)

    def _beat(self) -> None:
        try:
            self._beat_at(self._clock())
        except Exception:
            log.exception("fleet_exchange_failed")
        self._schedule()

    def _beat_at(self, now_ms: int) -> None:
        publish = now_ms >= self._next_publish_ms
        if publish:
            self._next_publish_ms = now_ms + self.settings.exchange_interval_ms
            self._log_events(self.ledger.tick(now_ms))
        began = time.perf_counter()
        report = self.ledger.report(now_ms)
        cost_ms = (time.perf_counter() - began) * 1000
        self._report_cost_ms += (cost_ms - self._report_cost_ms) * _COST_SMOOTHING
        # Between publications only news is worth a frame: heartbeats go at the publication
        # pace, which is what peers judge silence by.
        if self.hub is not None and self.hub.connected and (publish or report.usage):
            self.hub.send(report.encode())
        self._unpublished.append(report)
        if publish:
            self._reports.append(self._key, merged(self._unpublished).encode())
            self._unpublished.clear()
            self.published += 1

    def _log_events(self, events: LedgerEvents) -> None:
        members = len(self.ledger.members()) + 1
        for member in events.silenced:
            log.warning(kv("fleet_peer_silent", member=member, fallback=f"quota/{members} per key"))
        for member in events.forgotten:
            log.info(kv("fleet_peer_forgotten", member=member, evidence="silent while healthy"))
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
                    reason="own reports not read back in time",
                    echo_delay_ms=self.ledger.last_echo_delay_ms,
                    fallback=f"quota/{members} per peer",
                )
            )

    def _decode(self, key: bytes | None, value: bytes) -> FleetReport | None:
        try:
            return FleetReport.decode(value, self.ledger.key_arity)
        except ReportError as exc:
            self.undecodable += 1
            if self.undecodable == 1 or self.undecodable % 1000 == 0:
                log.warning(
                    kv("fleet_report_skipped", key=key, error=exc, skipped=self.undecodable)
                )
            return None

    def _on_record(self, key: bytes | None, value: bytes | None) -> None:
        if value is None:
            return
        report = self._decode(key, value)
        if report is None:
            return
        self.ledger.absorb(report, self._clock())
        if report.member == self.ledger.member and report.incarnation == self.ledger.incarnation:
            self.echo_ms.append(self.ledger.last_echo_delay_ms)
            self._echoed.set()

    def _on_hub_report(self, value: bytes) -> None:
        report = self._decode(b"hub", value)
        if report is not None:
            self.ledger.absorb(report, self._clock(), local=True)
