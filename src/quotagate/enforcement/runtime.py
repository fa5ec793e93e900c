"""The quota state one gateway shares between its quota stages, and its life.

Holds the engine's managers, the topic bytes-in thresholds, the usage-event writer and what is
known about the upstream; starts and stops them, joins the fleet and keeps house every second.
What the store holds and the admin writes to it are :class:`QuotaStoreSync`'s
(``store_sync``); the final KIP-219 step of every request is the throttle stage's
:class:`ResponseThrottle` (``response_throttle``).
Everything runs on the gateway's event loop; only the usage writer and the Prometheus collector
have threads of their own, and they see the engine only through snapshots.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any, Final

from quotagate.enforcement.fleet_link import FleetLink, ReportLogFactory, upstream_report_log
from quotagate.enforcement.metrics import build_snapshot
from quotagate.enforcement.settings import THROTTLE, QuotaSettings, configure, fleet_settings
from quotagate.enforcement.shadow import ShadowQuotas
from quotagate.enforcement.stamps import ConnectionStamps
from quotagate.enforcement.store_sync import QuotaStoreSync
from quotagate.enforcement.throttle import ResponseThrottle
from quotagate.enforcement.ticket import TICKET_KEY, QuotaTicket
from quotagate.enforcement.topic_admission import TopicAdmission
from quotagate.enforcement.upstream_facts import UpstreamFacts, refresh_forever
from quotagate.fleet.settings import FleetSettings
from quotagate.fleet.topic_publisher import TopicPublisher
from quotagate.gateway import (
    ConnectionLimits,
    Exchange,
    GatewayConfig,
    UpstreamSecurity,
    store_settings,
)
from quotagate.quota import QuotaManagers, TopicBytesInQuota, principal_user
from quotagate.store.backends import QuotaBackend, open_quota_store
from quotagate.usage import stream
from quotagate.usage.sink import Both, UsageSink
from quotagate.usage.writer import UsageWriter, UsageWriterSettings

log = logging.getLogger(__name__)

HOUSEKEEPING_S: Final = 1.0
"""Like Kafka's throttled-channel reaper, which polls its delay queue every second."""
UPSTREAM_REFRESH_S: Final = 30.0


class QuotaRuntime:
    def __init__(
        self,
        settings: QuotaSettings,
        *,
        gateway_id: str = "quotagate",
        bootstrap: Iterable[Any] = (),
        store: QuotaBackend | None = None,
        upstream_security: UpstreamSecurity | None = None,
    ) -> None:
        self.settings = settings
        self.upstream_security = upstream_security
        self.fleet: FleetLink | None = None
        """Set by :meth:`join_fleet` before start when the usage exchange is on."""
        self.gateway_id = gateway_id
        self.bootstrap = tuple(bootstrap)
        self.managers = QuotaManagers.create(
            settings.window_num,
            settings.window_size_s,
            settings.controller_window_num,
            settings.controller_window_size_s,
        )
        self.topic_admission = TopicAdmission(
            TopicBytesInQuota(settings.total_bytes_in_threshold, _wall_ms()),
            settings.topic_bytes_in_mode == THROTTLE,
        )
        self.facts = UpstreamFacts(settings.num_partitions)
        self.last_now_ms = 0
        """The latest ``now_ms`` any decision used (it may run ahead of the wall clock)."""
        self.snapshot: dict[str, Any] = {}
        """Metric values for the Prometheus collector, swapped whole every housekeeping tick."""
        self.stamps = ConnectionStamps()
        self.clients: dict[int, tuple[str, str]] = {}
        """(user, client id) of each open connection's latest request: connections per key."""
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self.response_throttle = ResponseThrottle(self.managers, gateway_id)
        self.shadow = ShadowQuotas(
            settings.window_num,
            settings.window_size_s,
            settings.controller_window_num,
            settings.controller_window_size_s,
        )
        """The shadow set (docs/quotas.md); the throttle stage holds it only while active."""
        self.shadow.on_active = self.response_throttle.set_shadow
        self.store_sync = QuotaStoreSync(
            settings, self.managers, self.topic_quota, store, self.shadow
        )

    @classmethod
    def from_config(
        cls,
        config: GatewayConfig,
        store: QuotaBackend | None = None,
        *,
        member: str | None = None,
        report_log: ReportLogFactory | None = None,
    ) -> QuotaRuntime:
        """``member`` names this worker in its fleet (default ``<gateway id>/0``);
        ``report_log`` opens the fleet's usage topic (default: on the upstream)."""
        settings = QuotaSettings.from_config(config)
        if store is None:
            store = open_quota_store(
                store_settings(configure(config)), f"quotagate-{member or 'store'}"
            )
        runtime = cls(
            settings,
            gateway_id=config.gateway_id,
            bootstrap=config.bootstrap_servers,
            store=store,
            upstream_security=config.upstream_security,
        )
        fleet = fleet_settings(config)
        if fleet.exchange_enabled:
            if report_log is None:
                span_ms = settings.window_num * settings.window_size_s * 1000
                report_log = upstream_report_log(config, span_ms)
            runtime.join_fleet(fleet, member or f"{config.gateway_id}/0", report_log)
        return runtime

    def join_fleet(self, fleet: FleetSettings, member: str, report_log: ReportLogFactory) -> None:
        """Share this worker's quotas with the fleet (before :meth:`start`)."""
        window_span_ms = self.settings.window_num * self.settings.window_size_s * 1000
        self.fleet = FleetLink(
            fleet,
            member,
            self.managers,
            self.topic_quota,
            window_span_ms,
            report_log(fleet, member),
            self.fleet_now_ms,
            # The shadow set is fleet-wide too: a client spread over workers is measured whole.
            self.shadow.fleet_shares(),
        )

    @property
    def usage(self) -> UsageSink | None:
        """Where usage events go, while started with a ``[usage]`` sink."""
        return self.response_throttle.usage

    @usage.setter
    def usage(self, writer: UsageSink | None) -> None:
        self.response_throttle.usage = writer

    @property
    def topic_throttles(self) -> int:
        return self.response_throttle.topic_throttles

    @property
    def topic_quota(self) -> TopicBytesInQuota:
        return self.topic_admission.quota

    @topic_quota.setter
    def topic_quota(self, quota: TopicBytesInQuota) -> None:
        # Replaced whole only before start (tests build one with a history); the store sync
        # applies thresholds to the same object.
        self.topic_admission.quota = quota
        self.store_sync.topic_quota = quota

    @property
    def topic_refusals(self) -> int:
        return self.topic_admission.refusals

    def _usage_sink(self) -> UsageSink | None:
        """The Parquet writer, the Kafka usage topic's publisher, both, or None (``[usage]``)."""
        usage = self.settings.usage
        files: UsageSink | None = None
        if usage.to_files:
            assert usage.path is not None  # to_files says so
            files = UsageWriter(
                UsageWriterSettings(
                    directory=usage.path,
                    gateway_id=self.gateway_id,
                    roll_interval_s=usage.roll_interval_s,
                    roll_bytes=usage.roll_bytes,
                    queue_size=usage.queue_size,
                )
            )
        if not usage.to_kafka:
            return files
        if usage.bootstrap_servers is not None:
            bootstrap, security = usage.bootstrap_servers, usage.security
        else:
            bootstrap = ",".join(str(address) for address in self.bootstrap)
            security = self.upstream_security
        topic: UsageSink = TopicPublisher(
            bootstrap,
            usage.topic,
            stream.record,
            client_config=security.librdkafka_config() if security is not None else None,
            client_id=f"quotagate-usage-{self.gateway_id}",
            partitions=usage.partitions,
            queue_size=usage.queue_size,
        )
        return topic if files is None else Both(files, topic)

    def fleet_now_ms(self) -> int:
        """Peers' usage is recorded at this worker's decision time, never behind it."""
        return max(self.last_now_ms, _wall_ms())

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.usage = self._usage_sink()
        loop = asyncio.get_running_loop()
        watch = getattr(self.store_sync.store, "watch", None)
        if watch is not None:
            # A change written by another process applies as soon as it is read, not at the
            # next housekeeping tick.
            watch(lambda: loop.call_soon_threadsafe(self.store_sync.store_changed))
        if self.fleet is not None:
            # Before the first request: a restarted worker begins with the fleet's usage.
            await self.fleet.start()
        if self.bootstrap:
            self._tasks.append(
                loop.create_task(
                    refresh_forever(
                        self.facts, self.bootstrap, UPSTREAM_REFRESH_S, self.upstream_security
                    )
                )
            )
        # A scrape before the first housekeeping tick sees every quota family too.
        self._refresh_snapshot(_wall_ms())
        self._timer = loop.call_later(HOUSEKEEPING_S, self._housekeeping)

    def readiness(self) -> str | None:
        """Not ready until the store is loaded, nor while a fleet's exchange is unhealthy
        (this worker would then enforce its own share only)."""
        if not self._started:
            return "quota store not loaded yet"
        fleet = self.fleet
        if fleet is not None and not fleet.ledger.exchange_healthy(_wall_ms()):
            return "fleet exchange unhealthy: this worker does not read its own usage reports back"
        return None

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.fleet is not None:
            await self.fleet.close()
        for task in self._tasks:
            task.cancel()
        # Give the cancellations a moment to land (a loop closing on pending tasks warns),
        # but never hold the shutdown on one: a refresh stuck in a connect may not answer.
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=1.0)
        self._tasks.clear()
        if self.usage is not None:
            usage, self.usage = self.usage, None
            await asyncio.get_running_loop().run_in_executor(None, usage.close)
        self.store_sync.close()

    # -- configuration ---------------------------------------------------------------------

    def attach_connections(self, connections: ConnectionLimits) -> None:
        self.store_sync.attach_connections(connections)

    # -- per request -----------------------------------------------------------------------

    def ticket(self, exchange: Exchange) -> QuotaTicket:
        ticket = exchange.get(TICKET_KEY)
        if ticket is None:
            ticket = self._open_ticket(exchange)
        return ticket

    def _open_ticket(self, exchange: Exchange) -> QuotaTicket:
        user = principal_user(exchange.connection.principal)
        client_id = exchange.header.client_id or ""
        mapper = self.store_sync.tenant_mapper
        tenant = mapper.tenant(user, client_id) if mapper.rules else ""
        connection_id = exchange.connection.connection_id
        now_ms = self.stamps.stamp(connection_id, exchange.received_ms, tenant)
        self.last_now_ms = max(self.last_now_ms, now_ms)
        ticket = QuotaTicket(now_ms, user, client_id, len(exchange.request_frame) - 4, tenant)
        exchange.put(TICKET_KEY, ticket)
        self.clients[exchange.connection.connection_id] = (ticket.user, ticket.client_id)
        return ticket

    def connection_closed(self, connection_id: int) -> None:
        self.clients.pop(connection_id, None)

    # -- housekeeping ----------------------------------------------------------------------

    def _housekeeping(self) -> None:
        try:
            self.tick(_wall_ms())
        except Exception:
            log.exception("quota_housekeeping_failed")
        self._timer = asyncio.get_running_loop().call_later(HOUSEKEEPING_S, self._housekeeping)

    def tick(self, wall_ms: int) -> None:
        """Release ended throttles, drop idle sensors, pick up store changes, refresh metrics."""
        self.managers.tick(wall_ms)
        self.shadow.tick(wall_ms)
        self.stamps.forget_before(wall_ms)
        if self.usage is not None:
            self.usage.flush()
        self.store_sync.follow()
        self._refresh_snapshot(wall_ms)

    def _refresh_snapshot(self, wall_ms: int) -> None:
        # Read at the wall clock, so an idle client's rates decay as Kafka's JMX values do
        # (peeked: reading never changes a later decision), but never before a decision.
        now_ms = max(self.last_now_ms, wall_ms)
        snapshot = build_snapshot(self, now_ms)
        if self.shadow.active:
            snapshot["series"].update(self.shadow.series(now_ms))
        if self.fleet is not None:
            snapshot["series"].update(self.fleet.snapshot(now_ms))
        self.snapshot = snapshot


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
