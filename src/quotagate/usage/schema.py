"""The usage-event schema of docs/design.md, in one place for writer and readers.

One row per request the gateway handled (or, after ingest, per line of a broker's
request log). ``topics`` holds record bytes per topic for a Produce and partition mutations
per topic, in request order, for CreateTopics, DeleteTopics and CreatePartitions.
Partitioned on disk as ``usage/date=YYYY-MM-DD/hour=HH/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa

from quotagate.quota.throttle_choice import Cause

TOPIC_BYTES_TYPE: Final = pa.struct([("topic", pa.string()), ("bytes", pa.int32())])

USAGE_SCHEMA: Final = pa.schema(
    [
        ("ts_ms", pa.int64()),
        ("gateway_id", pa.string()),
        ("listener", pa.string()),
        ("principal", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("api_key", pa.int16()),
        ("api_version", pa.int16()),
        ("request_bytes", pa.int32()),
        ("response_bytes", pa.int32()),
        ("topics", pa.list_(TOPIC_BYTES_TYPE)),
        ("partition_mutations", pa.int32()),
        ("acks", pa.int8()),
        ("follower", pa.bool_()),
        ("validate_only", pa.bool_()),
        ("gateway_time_us", pa.int64()),
        ("upstream_time_us", pa.int64()),
        ("throttle_ms", pa.int32()),
        ("throttle_cause", pa.string()),
        ("error_code", pa.int16()),
        ("tenant", pa.string()),
        # What the shadow quotas would have throttled (docs/quotas.md); null without any.
        ("shadow_throttle_ms", pa.int32()),
    ]
)

OPTIONAL_COLUMNS: Final[Mapping[str, object]] = {"tenant": "", "shadow_throttle_ms": None}
"""Columns added after the first release, with the value files written before them are read
with: a tenant of "" (none), no shadow throttle (null)."""

USAGE_COLUMNS: Final = tuple(USAGE_SCHEMA.names)

# Values of ``throttle_cause``; the empty string means "not throttled".
THROTTLE_CAUSES: Final = tuple(cause.value for cause in Cause)


@dataclass(slots=True)
class UsageEvent:
    """One row of the usage table, as the gateway builds it."""

    ts_ms: int
    gateway_id: str
    listener: str
    principal: str
    client_id: str
    client_host: str
    api_key: int
    api_version: int
    request_bytes: int
    response_bytes: int = 0
    topics: list[tuple[str, int]] = field(default_factory=list)
    partition_mutations: int = 0
    acks: int | None = None
    """Produce only (null elsewhere): acks=0 is exempt from the request quota."""
    follower: bool = False
    """A follower fetch: exempt from both quotas."""
    validate_only: bool = False
    """A mutation request that only validates: not charged to the mutation quota."""
    gateway_time_us: int = 0
    upstream_time_us: int = 0
    throttle_ms: int = 0
    throttle_cause: str = ""
    error_code: int = 0
    tenant: str = ""
    """The tenant ``tenant.mapping.rules`` mapped the request to; "" for none."""
    shadow_throttle_ms: int | None = None
    """The throttle the shadow quotas would have imposed; None when none was set."""

    def as_row(self) -> dict[str, object]:
        row: dict[str, object] = {name: getattr(self, name) for name in USAGE_COLUMNS}
        row["topics"] = [{"topic": t, "bytes": b} for t, b in self.topics]
        return row
