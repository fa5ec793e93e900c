"""The quota stages of a gateway, in the order they must run."""

from __future__ import annotations

from quotagate.gateway.config import GatewayConfig
from quotagate.gateway.quota_runtime import QuotaRuntime
from quotagate.gateway.stage import Stage
from quotagate.gateway.stages.client_quotas_api import ClientQuotasApiStage
from quotagate.gateway.stages.controller_mutation import ControllerMutationStage
from quotagate.gateway.stages.fetch_quota import FetchQuotaStage
from quotagate.gateway.stages.produce_quota import ProduceQuotaStage
from quotagate.gateway.stages.quota_throttle import QuotaThrottleStage
from quotagate.gateway.stages.topic_thresholds_api import TopicThresholdsApiStage


def quota_stages(runtime: QuotaRuntime) -> list[Stage]:
    """The throttle stage first: it opens every request's ticket and has the last word on
    every response (response stages run in reverse order)."""
    return [
        QuotaThrottleStage(runtime),
        ClientQuotasApiStage(runtime),
        TopicThresholdsApiStage(runtime),
        ControllerMutationStage(runtime),
        ProduceQuotaStage(runtime),
        FetchQuotaStage(runtime),
    ]


def quota_stages_for(config: GatewayConfig) -> tuple[QuotaRuntime, list[Stage]]:
    runtime = QuotaRuntime.from_config(config)
    return runtime, quota_stages(runtime)
