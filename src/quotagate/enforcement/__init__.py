"""Quota enforcement: the engine (``quotagate.quota``) applied to live traffic.

A gateway plug-in built on the gateway's public stage API only: :class:`QuotaEnforcement`
owns the shared :class:`QuotaRuntime` and gives the stages in the order they must run. The
per-request rules themselves are the engine's (``quotagate.quota.decide``, from the facts the
stages gather), shared with the pipeline's replay.
"""

from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.plugin import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings, UsageSettings

__all__ = ["QuotaCollector", "QuotaEnforcement", "QuotaRuntime", "QuotaSettings", "UsageSettings"]
