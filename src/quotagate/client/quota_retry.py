"""KIP-599 on the client side (spec §5.6): items refused with THROTTLING_QUOTA_EXCEEDED go
into a new call with the same deadline, until they pass or the deadline does.

The retried call waits for the throttle by itself: CreateTopics, DeleteTopics and
CreatePartitions self-throttle at every version that can carry error 89 (§6.3), so the node
is not ready before the throttle has passed. No try is counted and no backoff added.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from quotagate.client.clock import Clock
from quotagate.client.errors import KafkaError, KafkaTimeoutError, ThrottlingQuotaExceededError

K = TypeVar("K")

SendBatch = Callable[[list[K]], Awaitable[dict[K, KafkaError | None]]]
"""Sends one call for the given items; returns each item's outcome, raises for the call."""


async def run_with_quota_retry(
    items: Sequence[K], send: SendBatch[K], retry_on_quota_violation: bool, clock: Clock
) -> dict[K, KafkaError | None]:
    results: dict[K, KafkaError | None] = {}
    quota_errors: dict[K, ThrottlingQuotaExceededError] = {}
    pending = list(items)
    call_created_ms = clock()
    while pending:
        try:
            outcomes = await send(pending)
        except KafkaTimeoutError as exc:
            # Items we were retrying for quota reasons report what is left of their throttle,
            # counted from the creation of the call that timed out, not a bare timeout.
            elapsed_ms = clock() - call_created_ms
            for item in pending:
                quota_error = quota_errors.get(item)
                results[item] = (
                    exc if quota_error is None else quota_error.remaining_after(elapsed_ms)
                )
            break
        except KafkaError as exc:
            results.update(dict.fromkeys(pending, exc))
            break
        retry: list[K] = []
        for item, outcome in outcomes.items():
            if retry_on_quota_violation and isinstance(outcome, ThrottlingQuotaExceededError):
                quota_errors[item] = outcome
                retry.append(item)
            else:
                results[item] = outcome
        pending = retry
        call_created_ms = clock()
    return {item: results[item] for item in items}
