"""The per-topic bytes-in thresholds applied to one produce request's topics.

The thresholds are the gateway's own (the broker-side quota design, spec §6): a topic whose
rate is over its threshold is refused (``reject`` mode, the default) or throttled
(``throttle`` mode). The produce stage asks :meth:`TopicAdmission.check` which topics to
refuse and does the protocol work; the counts and the rate-limited log lines live here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from quotagate.logs import kv
from quotagate.quota import TopicBytesInQuota

log = logging.getLogger(__name__)

_REFUSAL_LOG_INTERVAL_MS: Final = 1000


class TopicAdmission:
    def __init__(self, quota: TopicBytesInQuota, throttle_mode: bool) -> None:
        self.quota = quota
        """Replaced whole only before start (tests build one with a history)."""
        self.throttle_mode = throttle_mode
        self.refusals = 0
        self._refusal_log: dict[str, tuple[int, int]] = {}

    @property
    def applies(self) -> bool:
        """Whether any threshold is set (otherwise topics are only metered)."""
        return self.quota.total_threshold is not None

    def check(
        self, topics: Iterable[tuple[str, int]], now: int, client_id: str, principal: str | None
    ) -> tuple[set[str], int]:
        """The topics to refuse, and how long to wait before the refused or throttled
        topics can pass (0 when none is over its threshold)."""
        quota = self.quota
        if quota.total_threshold is None:
            for topic, size in topics:
                quota.record_accepted(topic, size, now)
            return set(), 0
        refused: set[str] = set()
        wait_ms = 0
        for topic, size in topics:
            refusal = quota.check(topic, now)
            if refusal is None:
                quota.record_accepted(topic, size, now)
                continue
            if self.throttle_mode:
                # Throttled until the rates have decayed enough to admit the topic again.
                wait_ms = max(wait_ms, quota.throttle_ms(topic, now))
                quota.record_accepted(topic, size, now)
                quota.record_throttled(size, now)
            else:
                # Refused: retrying before the meters tick again cannot succeed, and a longer
                # mute would also hold back the connection's other topics, which must flow.
                wait_ms = max(wait_ms, _next_tick_ms(quota, topic, now))
                quota.record_error(size, now)
                refused.add(topic)
                self.refusals += 1
            self._log(str(refusal), topic, now, client_id, principal)
        return refused, wait_ms

    def _log(
        self, reason: str, topic: str, now: int, client_id: str, principal: str | None
    ) -> None:
        # Every refusal is counted; the log line is written at most once a second per topic
        # with the number of refusals since the last one, so a hot topic cannot flood the log.
        last_ms, count = self._refusal_log.get(topic, (0, 0))
        count += 1
        if now - last_ms < _REFUSAL_LOG_INTERVAL_MS:
            self._refusal_log[topic] = (last_ms, count)
            return
        self._refusal_log[topic] = (now, 0)
        log.info(
            kv(
                "topic_bytes_in_throttled" if self.throttle_mode else "topic_bytes_in_refused",
                reason=reason,
                refusals=count,
                client=client_id,
                principal=principal,
            )
        )


def _next_tick_ms(quota: TopicBytesInQuota, topic: str, now: int) -> int:
    meters = [quota.total_meter, quota.topic_meters.get(topic)]
    return max(min(m.ticked_by_ms(1) - now for m in meters if m is not None), 1)
