"""The runtime's link to its fleet: the ledger over this worker's managers and the exchange.

Built only when the usage exchange is on (``[fleet] exchange.enabled``, by default with the
upstream-backed store). The ledger shares produce, fetch and controller-mutation quotas and
the topic bytes-in thresholds; request-time quotas stay this worker's own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from quotagate.fleet.exchange import Clock, FleetExchange, ReportLog
from quotagate.fleet.local_hub import HUB_ENV
from quotagate.fleet.rolling_log import RollingTopicLog
from quotagate.fleet.settings import FleetSettings
from quotagate.fleet.trimmed_log import TrimmedTopicLog
from quotagate.gateway import GatewayConfig
from quotagate.quota import QuotaManagers, TopicBytesInQuota
from quotagate.quota.fleet_ledger import FleetLedger, PeerState
from quotagate.quota.fleet_shares import SharedQuota, shared_quotas

ReportLogFactory = Callable[[FleetSettings, str], ReportLog]
"""(settings, member id) → the log the exchange appends to and follows."""


def upstream_report_log(config: GatewayConfig, window_span_ms: int) -> ReportLogFactory:
    """The usage topic(s) on the upstream cluster the gateway fronts: one per period, or one
    trimmed (``[fleet] usage.trim``)."""
    bootstrap = config.bootstrap
    security = config.upstream_security.librdkafka_config()

    def open_log(settings: FleetSettings, member: str) -> ReportLog:
        # A worker that catches up reads a quota window back and finds it in the current
        # and the previous period only if a period is at least that long.
        period_ms = max(settings.usage_roll_ms, -(-window_span_ms // 1000) * 1000)
        common: dict[str, Any] = {
            "topic_config": {
                "cleanup.policy": "delete",
                "retention.ms": str(settings.usage_retention_ms),
            },
            "replication_factor": settings.replication_factor,
            "client_id": f"quotagate-fleet-{member.replace('/', '-')}",
            "client_config": security,
        }
        if settings.usage_trim == "delete-records":
            return TrimmedTopicLog(bootstrap, settings.topic, period_ms=period_ms, **common)
        return RollingTopicLog(bootstrap, settings.topic, roll_ms=period_ms, **common)

    return open_log


def new_incarnation() -> str:
    """``<start epoch ms>-<random>``: later starts compare as newer (fleet_ledger)."""
    return f"{time.time_ns() // 1_000_000}-{os.urandom(4).hex()}"


class FleetLink:
    def __init__(
        self,
        settings: FleetSettings,
        member: str,
        managers: QuotaManagers,
        topics: TopicBytesInQuota,
        window_span_ms: int,
        reports: ReportLog,
        clock: Clock,
        more_shares: Sequence[SharedQuota] = (),
    ) -> None:
        """``more_shares``: further quotas the fleet shares (the shadow set's)."""
        self.settings = settings
        self.ledger = FleetLedger(
            member,
            new_incarnation(),
            (*shared_quotas(managers, topics), *more_shares),
            silence_ms=settings.silence_ms,
            # A silent peer's usage has left every quota window after this long.
            forget_ms=max(window_span_ms, settings.silence_ms + 1),
            now_ms=clock(),
        )
        # Workers started by a supervisor find their instance's hub here (local_hub).
        hub_path = os.environ.get(HUB_ENV)
        self.exchange = FleetExchange(self.ledger, reports, settings, clock, hub_path)

    async def start(self) -> None:
        await self.exchange.start()

    async def close(self) -> None:
        await self.exchange.close()

    def snapshot(self, now_ms: int) -> dict[str, list[tuple[list[str], float]]]:
        """Metric series for the Prometheus collector (built on the event loop)."""
        ledger = self.ledger
        members = ledger.members()
        echoes = sorted(self.exchange.echo_ms)
        series: dict[str, list[tuple[list[str], float]]] = {
            "fleet_peers": [
                ([state.value], float(sum(m.state is state for m in members)))
                for state in PeerState
            ],
            "fleet_exchange_healthy": [([], float(ledger.exchange_healthy(now_ms)))],
            "fleet_reports_published": [([], float(self.exchange.published))],
            "fleet_reports_skipped": [([], float(self.exchange.undecodable))],
            "fleet_remote_recorded": [([k], v) for k, v in ledger.remote_recorded.items()],
            "fleet_fallback_recorded": [([k], v) for k, v in ledger.fallback_recorded.items()],
        }
        if echoes:
            series["fleet_report_echo_ms"] = [
                (["0.5"], float(echoes[len(echoes) // 2])),
                (["0.99"], float(echoes[min(len(echoes) - 1, len(echoes) * 99 // 100)])),
            ]
        return series
