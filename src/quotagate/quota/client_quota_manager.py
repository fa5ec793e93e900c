"""Byte-rate and request-time quotas per client (Kafka's ``ClientQuotaManager``).

One manager per quota type. Each sharing key gets a quota sensor (a Rate whose config
carries the resolved quota) and a throttle-time sensor (an Avg). A record is checked after
it lands; a violation turns into a throttle time with Kafka's formula. Quota changes swap
metric configs in place so history survives them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from quotagate.quota.entity import (
    EntityName,
    QuotaEntity,
    QuotaLimits,
    SharingKey,
    quota_source,
    sanitize_user,
)
from quotagate.quota.java import DOUBLE_MAX, UNBOUNDED, java_round, to_int32
from quotagate.quota.metric_config import MetricConfig, Quota
from quotagate.quota.quota_type import QuotaType
from quotagate.quota.rate import Rate
from quotagate.quota.sampled_stat import Avg
from quotagate.quota.sensor import Metric, QuotaViolation, Sensor
from quotagate.quota.throttle import bounded_throttle_time, throttle_time
from quotagate.quota.throttled_channels import ThrottledChannels

INACTIVE_SENSOR_EXPIRATION_S: Final = 3600
_THROTTLE_TIME_CONFIG: Final = MetricConfig()  # the broker-wide default: 2 samples of 30 s


@dataclass(slots=True)
class QuotaSensorState:
    """What the metrics exporter shows of one sharing key."""

    key: SharingKey
    sensor_name: str
    value: float
    limit: float
    throttle_time_avg: float
    throttle_ms_total: float
    """Every throttle recorded on the key since its sensors were created (a counter)."""
    source: str
    """Which of Kafka's eight levels configures the key (``quota_source``)."""


class ClientQuotaManager:
    """Quotas of one type (``"produce"``, ``"fetch"`` or ``"request"``).

    ``user`` arguments are principal *names* (``alice`` for ``User:alice``), sanitised here;
    client ids are used raw, as Kafka does. Values are in the type's recorded unit: bytes
    for produce/fetch, percent-of-one-thread for request (see ``nanos_to_percentage``).
    """

    def __init__(
        self,
        quota_type: QuotaType | str,
        window_num: int = 11,
        window_size_s: int = 1,
        *,
        sensor_expiration_s: int = INACTIVE_SENSOR_EXPIRATION_S,
    ) -> None:
        if window_num < 1 or window_size_s < 1:
            raise ValueError("quota.window.num and quota.window.size.seconds must be >= 1")
        self.quota_type = QuotaType.parse(quota_type)
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.sensor_expiration_s = sensor_expiration_s
        self.limits = QuotaLimits()
        self.throttled_channels: ThrottledChannels[Hashable] = ThrottledChannels()
        self._quota_sensors: dict[SharingKey, Sensor] = {}
        self._throttle_sensors: dict[SharingKey, Sensor] = {}
        # Kafka's throttle-time Avg says how long throttles are, not how much of the time a
        # key spends throttled; a running total lets a scraper take the rate of it.
        self._throttle_totals: dict[SharingKey, float] = {}
        self._keys: dict[tuple[str, str], SharingKey] = {}
        # A client's quota sensor while both its sensors live and its sharing key stands, by
        # user, then client id: a record looks up two strings (the users are few, and their
        # dicts stay in cache) instead of building, hashing and comparing a tuple. Emptied
        # when a quota changes or a sensor expires.
        self._live: dict[str, dict[str, Sensor]] = {}
        # The configured bound per client, asked on every metered request (a look-up walks
        # up to four entity levels); emptied with _keys whenever a quota changes.
        self._bounds: dict[tuple[str, str], float | None] = {}
        self._users: dict[str, str] = {}
        self.fallback_scale: dict[SharingKey, float] = {}
        """Throttle multipliers for keys whose fleet usage is partly assumed (fleet_ledger):
        Kafka's formula on the share of the quota this process is left with."""

    # -- configuration -------------------------------------------------------------------

    def update_quota(self, user: EntityName, client_id: EntityName, value: float | None) -> None:
        """Set (or, with ``value=None``, remove) the quota of an entity.

        Existing sensors keep their history; only their bound changes. A removed quota
        leaves the bound at Long.MAX_VALUE ("unbounded"), not at the old value.
        """
        entity = QuotaEntity.of(user, client_id)
        self.limits.set(entity, value)
        self._keys.clear()
        self._live.clear()
        self._bounds.clear()
        single_key = self.limits.key_of(entity) if self.limits.single_kind else None
        if single_key is not None:
            sensor = self._quota_sensors.get(single_key)
            if sensor is not None:
                self._reconfigure(sensor, self._limit_of(single_key))
            return
        for key, sensor in self._quota_sensors.items():
            limit = self._limit_of(key)
            if sensor.metrics[-1].config.quota != Quota.upper_bound(limit):
                self._reconfigure(sensor, limit)

    @property
    def quotas_enabled(self) -> bool:
        return self.limits.kinds_enabled != 0

    def quota_limit(self, user: str, client_id: str) -> float:
        """The bound that applies to this client now (Long.MAX_VALUE when none)."""
        return self._limit_of(self.sharing_key(user, client_id))

    def quota_applies(self, user: str, client_id: str) -> bool:
        """Whether a configured quota of this kind bounds this client (at any entity level)."""
        return self.quotas_enabled and self._configured_bound(user, client_id) is not None

    def _configured_bound(self, user: str, client_id: str) -> float | None:
        cache_key = (user, client_id)
        if cache_key in self._bounds:
            return self._bounds[cache_key]
        bound = self._bounds[cache_key] = self.limits.limit_for_key(
            self.sharing_key(user, client_id)
        )
        return bound

    def sharing_key(self, user: str, client_id: str) -> SharingKey:
        """The (user, client-id) tags of the rate this client is measured on."""
        cache_key = (user, client_id)
        key = self._keys.get(cache_key)
        if key is None:
            key = self.limits.sharing_key(self._sanitized(user), client_id)
            self._keys[cache_key] = key
        return key

    def max_value_in_quota_window(
        self, user: str, client_id: str, now_ms: int | None = None
    ) -> float:
        """The most a client may use in one quota window: caps a consumer fetch's max bytes.

        Kafka's ``getMaxValueInQuotaWindow`` also gets or creates the client's sensors; given
        ``now_ms``, so does this (the gateway asks without a clock: the fetch's record, later
        in the same exchange, creates them).
        """
        if not self.quotas_enabled:
            return DOUBLE_MAX
        if now_ms is not None:
            self._quota_sensor(self.sharing_key(user, client_id), now_ms)
        limit = self._configured_bound(user, client_id)
        if limit is None:
            return DOUBLE_MAX
        return limit * (self.window_num - 1) * self.window_size_s

    # -- recording -----------------------------------------------------------------------

    def record_and_get_throttle_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Record ``value`` and return how long to throttle (0 when within quota).

        Records nothing while no quota of this type was ever configured, as the broker does.
        """
        if not self.limits.kinds_enabled:
            return 0
        clients = self._live.get(user)
        if clients is None:
            clients = self._live[user] = {}
        sensor = clients.get(client_id)
        if sensor is None:
            sensor = clients[client_id] = self._quota_sensor(
                self.sharing_key(user, client_id), now_ms
            )
        try:
            sensor.record(value, now_ms)
        except QuotaViolation as violation:
            throttle_ms = self._throttle_time(violation, now_ms)
            if self.fallback_scale:
                scale = self.fallback_scale.get(self.sharing_key(user, client_id), 1.0)
                throttle_ms = java_round(throttle_ms * scale)
            return to_int32(throttle_ms)
        return 0

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Record without checking. As Kafka's ``recordNoThrottle`` and ``unrecordQuotaSensor``,
        whether or not a quota is enabled: the key's sensors are made (unbounded) if need be,
        and what is recorded now counts once a quota applies to the key."""
        self._quota_sensor(self.sharing_key(user, client_id), now_ms).record(
            value, now_ms, check_quotas=False
        )

    def record_remote(self, key: SharingKey, value: float, now_ms: int) -> None:
        """Record what another worker of the fleet measured on ``key`` (never throttles)."""
        if self.limits.kinds_enabled:
            self._quota_sensor(key, now_ms).record_remote(value, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch whose data was not sent)."""
        self.record_no_throttle(user, client_id, -value, now_ms)

    def throttle(
        self, user: str, client_id: str, channel: Hashable, throttle_ms: int, now_ms: int
    ) -> None:
        """Note that ``channel`` is muted for ``throttle_ms`` because of this quota."""
        if throttle_ms <= 0:
            return
        key = self.sharing_key(user, client_id)
        # As Kafka's throttle (getOrCreateQuotaSensors): both sensors of the key are got or
        # created, so a throttle of a key with no quota sensor yet creates that one too.
        self._quota_sensor(key, now_ms)
        self._throttle_sensor(key, now_ms).record(throttle_ms, now_ms, check_quotas=False)
        self._throttle_totals[key] = self._throttle_totals.get(key, 0.0) + throttle_ms
        self.throttled_channels.add(channel, throttle_ms, now_ms)

    def due_channels(self, now_ms: int) -> list[Hashable]:
        return self.throttled_channels.due(now_ms)

    # -- inspection and housekeeping -----------------------------------------------------

    def quota_sensors(self) -> Mapping[SharingKey, Sensor]:
        """The live quota sensors by sharing key (read-only: what a fleet report is made of)."""
        return self._quota_sensors

    def limit_for_key(self, key: SharingKey) -> float | None:
        """The configured quota of a sharing key, None when none applies."""
        return self.limits.limit_for_key(key)

    def quota_metric(self, user: str, client_id: str) -> Metric | None:
        sensor = self._quota_sensors.get(self.sharing_key(user, client_id))
        return sensor.metrics[-1] if sensor is not None else None

    def sensor_names(self) -> list[str]:
        return [s.name for s in self._quota_sensors.values()] + [
            s.name for s in self._throttle_sensors.values()
        ]

    def states(self, now_ms: int) -> Iterator[QuotaSensorState]:
        """Current value of every live sharing key, read without side effects (``peek``)."""
        for key, sensor in self._quota_sensors.items():
            metric = sensor.metrics[-1]
            throttle = self._throttle_sensors.get(key)
            yield QuotaSensorState(
                key=key,
                sensor_name=sensor.name,
                value=metric.peek(now_ms),
                limit=metric.config.quota.bound if metric.config.quota else UNBOUNDED,
                throttle_time_avg=(throttle.metrics[0].peek(now_ms) if throttle else float("nan")),
                throttle_ms_total=self._throttle_totals.get(key, 0.0),
                source=quota_source(self.limits.source_for_key(key)),
            )

    def expire_sensors(self, now_ms: int) -> list[SharingKey]:
        """Drop sensors idle for longer than the expiry; returns the quota keys removed."""
        expired_throttle = False
        expired = [
            key
            for key, sensor in self._quota_sensors.items()
            if sensor.has_expired(now_ms, self.sensor_expiration_s)
        ]
        for key in expired:
            del self._quota_sensors[key]
        for key, sensor in list(self._throttle_sensors.items()):
            if sensor.has_expired(now_ms, self.sensor_expiration_s):
                del self._throttle_sensors[key]
                self._throttle_totals.pop(key, None)
                expired_throttle = True
        if expired or expired_throttle:
            self._live.clear()
        return expired

    # -- internals -----------------------------------------------------------------------

    def _sanitized(self, user: str) -> str:
        sanitized = self._users.get(user)
        if sanitized is None:
            sanitized = self._users[user] = sanitize_user(user)
        return sanitized

    def _limit_of(self, key: SharingKey) -> float:
        limit = self.limits.limit_for_key(key)
        return UNBOUNDED if limit is None else limit

    def quota_config(self, limit: float) -> MetricConfig:
        return MetricConfig(
            samples=self.window_num,
            time_window_ms=self.window_size_s * 1000,
            quota=Quota.upper_bound(limit),
        )

    def _reconfigure(self, sensor: Sensor, limit: float) -> None:
        metric = sensor.metrics[-1]
        metric.config = metric.config.with_quota(Quota.upper_bound(limit))

    def _quota_sensor(self, key: SharingKey, now_ms: int) -> Sensor:
        sensor = self._quota_sensors.get(key)
        if sensor is None:
            sensor = Sensor(f"{self.quota_type.value}-{key[0]}:{key[1]}", now_ms)
            self._register_quota_metrics(sensor, key)
            self._quota_sensors[key] = sensor
        # As Kafka's getOrCreateQuotaSensors: every record gets or creates both sensors, so a
        # throttle-time sensor that expired (it is only recorded on a throttle, so it can
        # outlive its idle hour while the quota sensor lives on) is back at the next record.
        self._throttle_sensor(key, now_ms)
        return sensor

    def _register_quota_metrics(self, sensor: Sensor, key: SharingKey) -> None:
        sensor.add(self.quota_type.metric_name, Rate(), self.quota_config(self._limit_of(key)))

    def _throttle_sensor(self, key: SharingKey, now_ms: int) -> Sensor:
        sensor = self._throttle_sensors.get(key)
        if sensor is None:
            sensor = Sensor(f"{self.quota_type.value}ThrottleTime-{key[0]}:{key[1]}", now_ms)
            sensor.add("throttle-time", Avg(), _THROTTLE_TIME_CONFIG)
            self._throttle_sensors[key] = sensor
        return sensor

    def _throttle_time(self, violation: QuotaViolation, now_ms: int) -> int:
        if self.quota_type is QuotaType.REQUEST:
            # KIP-124: a request-time throttle never exceeds one quota window.
            return bounded_throttle_time(violation, self.window_size_s * 1000, now_ms)
        return throttle_time(violation, now_ms)
