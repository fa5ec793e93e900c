"""KIP-580 backoff for the admin client: which ``ExponentialBackoff`` each purpose uses and
how attempts are counted for it (spec §7.2, §7.3).

The arithmetic lives in :class:`quotagate.quota.ExponentialBackoff`; this module only
decides its parameters and keeps the per-call / per-node attempt counters, with time passed
in, so every sequence can be checked exactly under a seeded random source.
"""

from __future__ import annotations

import logging
from typing import Final

from quotagate.client.config import AdminConfig, reconnect_backoff_bounds
from quotagate.quota.backoff import ExponentialBackoff, RandomSource

log = logging.getLogger(__name__)

# CommonClientConfigs.RETRY_BACKOFF_EXP_BASE / RETRY_BACKOFF_JITTER; the same shape is used
# for reconnects and connection-setup timeouts (ClusterConnectionStates).
MULTIPLIER: Final = 2
JITTER: Final = 0.2


def retry_backoff(config: AdminConfig, rng: RandomSource | None = None) -> ExponentialBackoff:
    """Backoff between tries of a failed call (``retry.backoff.ms`` .. ``retry.backoff.max.ms``).

    When the initial value exceeds the maximum Kafka warns and uses the maximum as a
    constant; ``ExponentialBackoff`` already degenerates to exactly that constant.
    """
    if config.retry_backoff_ms > config.retry_backoff_max_ms:
        log.warning(
            "Configuration 'retry.backoff.ms' with value '%d' is greater than configuration "
            "'retry.backoff.max.ms' with value '%d'. A static backoff with value '%d' will be "
            "applied.",
            config.retry_backoff_ms,
            config.retry_backoff_max_ms,
            config.retry_backoff_max_ms,
        )
    return ExponentialBackoff(
        config.retry_backoff_ms, MULTIPLIER, config.retry_backoff_max_ms, JITTER, rng
    )


def reconnect_backoff(config: AdminConfig, rng: RandomSource | None = None) -> ExponentialBackoff:
    initial, maximum = reconnect_backoff_bounds(config)
    return ExponentialBackoff(initial, MULTIPLIER, maximum, JITTER, rng)


def connection_setup_timeout(
    config: AdminConfig, rng: RandomSource | None = None
) -> ExponentialBackoff:
    return ExponentialBackoff(
        config.socket_connection_setup_timeout_ms,
        MULTIPLIER,
        config.socket_connection_setup_timeout_max_ms,
        JITTER,
        rng,
    )


class CallBackoff:
    """Tries of one admin call: ``nextAllowedTry = now + backoff(tries++)``
    (``KafkaAdminClient.Call.fail``), so the first retry waits about ``retry.backoff.ms``."""

    __slots__ = ("_backoff", "tries")

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self._backoff = backoff
        self.tries = 0

    def next_delay_ms(self) -> int:
        delay = self._backoff.backoff(self.tries)
        self.tries += 1
        return delay


class ReconnectState:
    """When a node may be connected to again (``ClusterConnectionStates``).

    A connect attempt and a disconnect both stamp ``last_attempt_ms``; a failure sets the
    backoff to ``backoff(failed_attempts)`` and then counts it; reaching READY resets both.
    """

    __slots__ = ("_backoff", "backoff_ms", "failed_attempts", "last_attempt_ms")

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self._backoff = backoff
        self.failed_attempts = 0
        self.backoff_ms = backoff.backoff(0)
        self.last_attempt_ms: float | None = None

    def connecting(self, now_ms: float) -> None:
        self.last_attempt_ms = now_ms

    def failed(self, now_ms: float) -> None:
        self.last_attempt_ms = now_ms
        self.backoff_ms = self._backoff.backoff(self.failed_attempts)
        self.failed_attempts += 1

    def ready(self) -> None:
        self.failed_attempts = 0
        self.backoff_ms = self._backoff.backoff(0)

    def delay_ms(self, now_ms: float) -> float:
        """How long until a connect attempt is allowed (0 = now)."""
        if self.last_attempt_ms is None or self.failed_attempts == 0:
            return 0.0
        return max(0.0, self.last_attempt_ms + self.backoff_ms - now_ms)


class SetupTimeoutState:
    """``socket.connection.setup.timeout.ms``: a setup that times out doubles the next one
    (``failedConnectAttempts++`` *then* ``backoff(failedConnectAttempts)``)."""

    __slots__ = ("_backoff", "failed_attempts", "timeout_ms")

    def __init__(self, backoff: ExponentialBackoff) -> None:
        self._backoff = backoff
        self.failed_attempts = 0
        self.timeout_ms = backoff.backoff(0)

    def timed_out(self) -> None:
        self.failed_attempts += 1
        self.timeout_ms = self._backoff.backoff(self.failed_attempts)

    def ready(self) -> None:
        self.failed_attempts = 0
        self.timeout_ms = self._backoff.backoff(0)
