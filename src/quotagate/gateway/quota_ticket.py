"""What the quota stages note about one request between reading it and answering it.

Every quota decision of a request uses ``now_ms = ticket.now_ms``, the wall-clock epoch
millisecond at which the request was read (the usage event's ``ts_ms``), so that replaying
usage events through the engine reproduces the gateway's throttles (docs/quotas.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from quotagate.quota import REQUEST_CAUSE, ControllerMutationQuota

PRODUCE: Final = "produce"
FETCH: Final = "fetch"
REQUEST: Final = REQUEST_CAUSE
CONTROLLER_MUTATION: Final = "controller_mutation"
TOPIC_BYTES_IN: Final = "topic_bytes_in"

TICKET_KEY: Final = "quota"


@dataclass(slots=True)
class QuotaTicket:
    now_ms: int
    user: str
    """Principal name as the quota managers take it (``alice`` for ``User:alice``)."""
    client_id: str
    request_bytes: int
    acks: int | None = None
    """Produce only."""
    produce_ms: int = 0
    topic_bytes_in_ms: int = 0
    mutation_quota: ControllerMutationQuota | None = None
    fetch_bytes: int = -1
    """Bytes recorded on the fetch quota (-1: nothing recorded)."""
    fetch_ms: int = 0
    fetch_empty: Callable[[int], Any] | None = None
    """Builds the empty fetch response that replaces a throttled one."""
    follower_fetch: bool = False
    topics: list[tuple[str, int]] = field(default_factory=list)
    partition_mutations: int = 0
    error_code: int = 0
    """The first error the gateway itself imposed."""
    hold: bool = False
    finished: bool = False

    def impose_error(self, code: int) -> None:
        if not self.error_code:
            self.error_code = code

