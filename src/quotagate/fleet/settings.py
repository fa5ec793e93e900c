"""The ``[fleet]`` section: how the workers of a fleet share their quotas' usage.

::

    [fleet]
    id = "payments-edge"              # instances naming the same upstream and id are one fleet
    "exchange.enabled" = true         # default: on with [store] backend = "kafka"
    "exchange.interval.ms" = 100      # how often each worker publishes its usage
    "exchange.local.interval.ms" = 20 # how often workers of one instance tell each other
    "usage.topic" = "_quotagate.payments-edge.usage"   # default: from the id
    "usage.retention.ms" = 600000
    "usage.roll.ms" = 60000           # a new usage topic per period (bounded follow cost)
    "usage.trim" = "roll"             # or "delete-records": one topic, trimmed (Kafka only)
    "replication.factor" = -1         # -1: the upstream's default.replication.factor
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

USAGE_TRIMS: Final = ("roll", "delete-records")

SILENT_AFTER_INTERVALS: Final = 3
"""A peer not heard from for this many exchange intervals is silent (its fair share is
assumed from then on)."""


@dataclass(frozen=True, slots=True)
class FleetSettings:
    fleet_id: str = "quotagate"
    exchange_enabled: bool = False
    """Parsed as on exactly when the store is the upstream's (``[store] backend = "kafka"``),
    unless the section says otherwise."""
    exchange_interval_ms: int = 100
    exchange_local_interval_ms: int = 20
    """Between the workers of one instance, through its hub (local_hub)."""
    usage_topic: str | None = None
    usage_retention_ms: int = 600_000
    usage_roll_ms: int = 60_000
    """Reports go to one topic per period this long (rolling_log), or, trimmed, are kept
    two periods (trimmed_log); at least a quota window."""
    usage_trim: str = "roll"
    """``roll``: a topic per period, deleted when past (any upstream); ``delete-records``: one
    topic trimmed with DeleteRecords (trimmed_log; the upstream must answer it)."""
    replication_factor: int = -1

    @property
    def topic(self) -> str:
        return self.usage_topic or f"_quotagate.{self.fleet_id}.usage"

    @property
    def silence_ms(self) -> int:
        return SILENT_AFTER_INTERVALS * self.exchange_interval_ms
