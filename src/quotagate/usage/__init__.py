"""Usage events: the contract between the gateway (writer) and the pipeline (reader)."""

from quotagate.usage.schema import (
    THROTTLE_CAUSES,
    USAGE_COLUMNS,
    USAGE_SCHEMA,
    UsageEvent,
)

__all__ = ["THROTTLE_CAUSES", "USAGE_COLUMNS", "USAGE_SCHEMA", "UsageEvent"]
