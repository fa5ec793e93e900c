"""Controller-mutation quotas (KIP-599): a token bucket of partition mutations per client.

Newer request versions get a *strict* quota that rejects a topic while the bucket is already
negative; older versions get a *permissive* one that accepts and throttles instead. The
throttle a response carries decays with the time since it was computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Final

from quotagate.quota.client_quota_manager import ClientQuotaManager
from quotagate.quota.entity import SharingKey
from quotagate.quota.java import java_round, to_int32
from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.quota_type import QuotaType
from quotagate.quota.rate import Rate
from quotagate.quota.sensor import QuotaViolation, Sensor
from quotagate.quota.token_bucket import TokenBucket

THROTTLING_QUOTA_EXCEEDED: Final = 89
THROTTLING_QUOTA_EXCEEDED_MESSAGE: Final = "The throttling quota has been exceeded."

# Request versions from which a mutation quota is strict (API key -> version).
STRICT_SINCE_VERSION: Final = {19: 6, 20: 5, 37: 3}


class ThrottlingQuotaExceeded(Exception):  # noqa: N818 - Kafka's name for the same thing
    """A strict mutation quota refused a topic; retriable after ``throttle_ms``."""

    error_code: ClassVar[int] = THROTTLING_QUOTA_EXCEEDED

    def __init__(self, throttle_ms: int) -> None:
        super().__init__(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        self.throttle_ms = throttle_ms


def mutation_throttle_time(violation: QuotaViolation) -> int:
    """Time for the bucket to refill back to zero tokens."""
    if not isinstance(violation.metric.stat, TokenBucket):
        raise TypeError(f"metric {violation.metric.name} is not a TokenBucket")
    return java_round(-violation.value / violation.bound * 1000)


class ControllerMutationQuota:
    """The quota one request is charged against."""

    def record(self, partitions: float, now_ms: int) -> None:
        """Charge ``partitions`` mutations; a strict quota raises ``ThrottlingQuotaExceeded``."""

    def check(self, now_ms: int) -> None:
        """What a strict quota's ``record`` checks first: raise ``ThrottlingQuotaExceeded``
        while the bucket is already negative (nothing for the others)."""

    def record_checked(self, partitions: float, now_ms: int) -> None:
        """``record`` once :meth:`check` passed (or must be ignored): never raises."""
        self.record(partitions, now_ms)

    def throttle_time(self, now_ms: int) -> int:
        return 0

    @property
    def is_exceeded(self) -> bool:
        return False


class UnboundedControllerMutationQuota(ControllerMutationQuota):
    """No quota configured at all: nothing is recorded, nothing is throttled."""


class _BoundedQuota(ControllerMutationQuota):
    def __init__(self, sensor: Sensor) -> None:
        self._sensor = sensor
        self._last_throttle_ms = 0
        self._last_recorded_ms = 0

    def throttle_time(self, now_ms: int) -> int:
        return to_int32(max(0, self._last_throttle_ms - (now_ms - self._last_recorded_ms)))

    def _note_violation(self, violation: QuotaViolation, now_ms: int) -> None:
        self._last_throttle_ms = mutation_throttle_time(violation)
        self._last_recorded_ms = now_ms


class StrictControllerMutationQuota(_BoundedQuota):
    def record(self, partitions: float, now_ms: int) -> None:
        try:
            self._sensor.record_strict(partitions, now_ms)
        except QuotaViolation as violation:
            self._note_violation(violation, now_ms)
            raise ThrottlingQuotaExceeded(to_int32(self._last_throttle_ms)) from None

    def check(self, now_ms: int) -> None:
        try:
            self._sensor.check_quotas(now_ms)
        except QuotaViolation as violation:
            self._note_violation(violation, now_ms)
            raise ThrottlingQuotaExceeded(to_int32(self._last_throttle_ms)) from None

    def record_checked(self, partitions: float, now_ms: int) -> None:
        self._sensor.record(partitions, now_ms, check_quotas=False)

    @property
    def is_exceeded(self) -> bool:
        return self._last_throttle_ms > 0


class PermissiveControllerMutationQuota(_BoundedQuota):
    def record(self, partitions: float, now_ms: int) -> None:
        try:
            self._sensor.record(partitions, now_ms)
        except QuotaViolation as violation:
            self._note_violation(violation, now_ms)


class HierarchicalMutationQuota(ControllerMutationQuota):
    """A client's quota and its tenant's, charged together (issue 25): a strict pair admits a
    topic only while neither bucket is negative, and then charges both; the throttle is the
    larger of the two."""

    def __init__(self, levels: tuple[ControllerMutationQuota, ...]) -> None:
        self.levels = levels

    def record(self, partitions: float, now_ms: int) -> None:
        self.check(now_ms)
        for level in self.levels:
            level.record_checked(partitions, now_ms)

    def check(self, now_ms: int) -> None:
        for level in self.levels:
            level.check(now_ms)

    def record_checked(self, partitions: float, now_ms: int) -> None:
        for level in self.levels:
            level.record_checked(partitions, now_ms)

    def throttle_time(self, now_ms: int) -> int:
        return max(level.throttle_time(now_ms) for level in self.levels)

    def throttle_level(self, now_ms: int) -> tuple[int, int]:
        """(throttle ms, index of the level it comes from): the first level wins ties."""
        best_ms, best = 0, 0
        for index, level in enumerate(self.levels):
            ms = level.throttle_time(now_ms)
            if ms > best_ms:
                best_ms, best = ms, index
        return best_ms, best

    @property
    def is_exceeded(self) -> bool:
        return any(level.is_exceeded for level in self.levels)


class ExemptMutationQuota(ControllerMutationQuota):
    """An exempt principal's quota: every mutation charged (metered), none refused nor
    throttled."""

    def __init__(self, metered: ControllerMutationQuota) -> None:
        self.metered = metered

    def record(self, partitions: float, now_ms: int) -> None:
        self.metered.record_checked(partitions, now_ms)


class ControllerMutationQuotaManager(ClientQuotaManager):
    """``controller_mutation_rate`` quotas with Kafka's ``controller.quota.window.*`` settings."""

    def __init__(self, window_num: int = 11, window_size_s: int = 1) -> None:
        super().__init__(QuotaType.CONTROLLER_MUTATION, window_num, window_size_s)

    def new_strict_quota(self, user: str, client_id: str, now_ms: int) -> ControllerMutationQuota:
        if not self.quotas_enabled:
            return UnboundedControllerMutationQuota()
        return StrictControllerMutationQuota(self._sensor_for(user, client_id, now_ms))

    def new_permissive_quota(
        self, user: str, client_id: str, now_ms: int
    ) -> ControllerMutationQuota:
        if not self.quotas_enabled:
            return UnboundedControllerMutationQuota()
        return PermissiveControllerMutationQuota(self._sensor_for(user, client_id, now_ms))

    def new_quota_for(
        self, api_key: int, api_version: int, user: str, client_id: str, now_ms: int
    ) -> ControllerMutationQuota:
        """Strict from CreateTopics v6, DeleteTopics v5 and CreatePartitions v3."""
        if api_version >= STRICT_SINCE_VERSION[api_key]:
            return self.new_strict_quota(user, client_id, now_ms)
        return self.new_permissive_quota(user, client_id, now_ms)

    def record_and_get_throttle_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Strict: refuse (record nothing, return the wait) while the bucket is negative.

        As Kafka's override, whether or not a quota is enabled (the key's sensors are made,
        unbounded, if need be)."""
        sensor = self._sensor_for(user, client_id, now_ms)
        try:
            sensor.record_strict(value, now_ms)
        except QuotaViolation as violation:
            return to_int32(mutation_throttle_time(violation))
        return 0

    def mutation_rates(self, now_ms: int) -> Iterator[tuple[SharingKey, float]]:
        """Kafka's ``mutation-rate`` of every live sharing key, read without side effects."""
        for key, sensor in self._quota_sensors.items():
            yield key, sensor.metric("mutation-rate").peek(now_ms)

    def tokens(self, user: str, client_id: str, now_ms: int) -> float:
        metric = self.quota_metric(user, client_id)
        return metric.measure(now_ms) if metric is not None else float("inf")

    def _sensor_for(self, user: str, client_id: str, now_ms: int) -> Sensor:
        return self._quota_sensor(self.sharing_key(user, client_id), now_ms)

    def _register_quota_metrics(self, sensor: Sensor, key: SharingKey) -> None:
        # The observed rate uses the broker-wide default window and carries no quota.
        sensor.add("mutation-rate", Rate(), MetricConfig())
        sensor.add("tokens", TokenBucket(), self.quota_config(self._limit_of(key)))

    def _throttle_time(self, violation: QuotaViolation, now_ms: int) -> int:
        return mutation_throttle_time(violation)
