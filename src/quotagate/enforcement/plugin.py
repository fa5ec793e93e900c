"""Quota enforcement as a gateway plug-in: the runtime it owns and its stages, in order."""

from __future__ import annotations

from collections.abc import Sequence

from quotagate.enforcement import settings
from quotagate.enforcement.client_quotas_api import ClientQuotasApiStage
from quotagate.enforcement.fetch import FetchQuotaStage
from quotagate.enforcement.mutations import ControllerMutationStage
from quotagate.enforcement.own_configs_api import OwnConfigsApiStage
from quotagate.enforcement.produce import ProduceQuotaStage
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import FLEET_SECTION, QUOTAS_SECTION, USAGE_SECTION
from quotagate.enforcement.throttle import QuotaThrottleStage
from quotagate.enforcement.topic_thresholds_api import TopicThresholdsApiStage
from quotagate.gateway import ConnectionLimits, GatewayConfig, Plugin, Stage


class QuotaEnforcement(Plugin):
    """Owns the :class:`QuotaRuntime` (managers, store, usage writer, housekeeping) that
    every quota stage shares: started before the first request, closed after the last."""

    sections = (QUOTAS_SECTION, USAGE_SECTION, FLEET_SECTION)

    @classmethod
    def configure(cls, config: GatewayConfig) -> GatewayConfig:
        return settings.configure(config)

    def __init__(self, runtime: QuotaRuntime) -> None:
        self.runtime = runtime
        # The throttle stage first: it opens every request's ticket and has the last word on
        # every response (response stages run in reverse order).
        # Each stage gets the parts of the runtime it uses, and no more.
        ticket, managers, store = runtime.ticket, runtime.managers, runtime.store_sync
        throttle = runtime.response_throttle
        self._stages: tuple[Stage, ...] = (
            QuotaThrottleStage(ticket, runtime.connection_closed, throttle),
            ClientQuotasApiStage(ticket, store),
            TopicThresholdsApiStage(ticket, store),
            OwnConfigsApiStage(store),
            ControllerMutationStage(ticket, managers, runtime.facts),
            ProduceQuotaStage(ticket, managers, runtime.topic_admission, throttle),
            FetchQuotaStage(ticket, managers, runtime.shadow),
        )

    @classmethod
    def from_config(cls, config: GatewayConfig, member: str | None = None) -> QuotaEnforcement:
        """``member``: this worker's name in its fleet (``<gateway id>/<worker index>``)."""
        return cls(QuotaRuntime.from_config(config, member=member))

    def stages(self) -> Sequence[Stage]:
        return self._stages

    def attach(self, connections: ConnectionLimits) -> None:
        # Kafka measures connection creation rates over the client-quota windows.
        settings = self.runtime.settings
        connections.measure_rates_over(settings.window_num, settings.window_size_s)
        self.runtime.attach_connections(connections)

    async def start(self) -> None:
        await self.runtime.start()

    async def close(self) -> None:
        await self.runtime.close()

    def readiness(self) -> str | None:
        return self.runtime.readiness()
