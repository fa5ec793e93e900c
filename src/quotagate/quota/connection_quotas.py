"""Connection quotas (Kafka's ``ConnectionQuotas``: KIP-306, KIP-402, KIP-612), sans-I/O.

Kafka bounds new connections in three ways, all decided here and enforced by the shell:

* **Counts.** ``max.connections`` for the broker and per listener: when no slot is free
  the acceptor *waits* (it stops accepting) until a connection closes.
  ``max.connections.per.ip`` with ``max.connections.per.ip.overrides``: a connection over
  its IP's limit is counted, refused, and the caller takes the count back (:meth:`dec`).
* **Creation rates.** ``max.connection.creation.rate`` for the broker and per listener: every
  accepted connection is recorded; when that breaks a quota the acceptor waits the throttle
  time before it goes on (:meth:`record_connection`).
* **IP creation rate** (``connection_creation_rate`` of ip quota entities, default and
  specific): a connection over its IP's rate is not accepted; it is held, unread, for the
  throttle time and then closed, and it is taken back out of every rate it was recorded in,
  so one storming IP never slows the acceptor for the others (:meth:`admit`).

Rates are Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds``
(the client-quota windows), and every throttle is capped at one window, as Kafka's is.
Time is always an argument; the shell calls in the order Kafka's acceptor does:
:meth:`record_connection`, wait, :meth:`slot_available` (wait again while it is False),
:meth:`admit`, and :meth:`dec` when the connection closes.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from quotagate.quota.java import INT_MAX
from quotagate.quota.metric_config import MetricConfig, Quota
from quotagate.quota.rate import Rate
from quotagate.quota.sampled_stat import Avg
from quotagate.quota.sensor import QuotaViolation, Sensor
from quotagate.quota.throttle import bounded_throttle_time

IP_CONNECTION_RATE_DEFAULT: Final = INT_MAX
"""``connection_creation_rate`` when no ip entity sets one: no quota (Kafka's Int.MaxValue)."""
IP_SENSOR_EXPIRATION_S: Final = 3600
"""An IP's rate sensor is dropped after an hour without connections, as in Kafka."""


class AdmissionKind(enum.Enum):
    ACCEPTED = "accepted"
    THROTTLED = "throttled"
    """Over the IP's connection creation rate: hold the socket ``throttle_ms``, then close it."""
    REFUSED = "refused"
    """Over ``max.connections.per.ip``: close at once, then :meth:`ConnectionQuotas.dec`."""


@dataclass(frozen=True, slots=True)
class ConnectionAdmission:
    kind: AdmissionKind
    throttle_ms: int = 0
    limit: int = 0
    """The per-IP count limit a refused connection hit."""


ACCEPTED: Final = ConnectionAdmission(AdmissionKind.ACCEPTED)


def canonical_ip(address: str) -> str:
    """The one spelling of an address the quotas are keyed by.

    An IPv4 client of a dual-stack listener appears as ``::ffff:a.b.c.d``; Java's
    ``InetAddress`` turns that into the IPv4 address, and so does this.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


@dataclass(slots=True)
class _ListenerQuota:
    max_connections: int
    rate: Sensor
    throttle: Sensor
    """Average throttle of the acceptor (broker or listener rate): Kafka's
    ``connection-accept-throttle-time``."""
    ip_throttle: Sensor
    """Average throttle of held IP connections: ``ip-connection-accept-throttle-time``."""
    count: int = 0


class ConnectionQuotas:
    """Connection counts and creation rates of one broker (here: one gateway process)."""

    def __init__(
        self,
        *,
        window_num: int = 11,
        window_size_s: int = 1,
        max_connections: int = INT_MAX,
        max_connections_per_ip: int = INT_MAX,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        max_connection_creation_rate: int = INT_MAX,
        protected_listener: str | None = None,
    ) -> None:
        """``protected_listener`` is Kafka's inter-broker listener, exempt from the broker-wide
        limits while another listener exists; a gateway has none (None)."""
        self._window_num = window_num
        self._window_ms = window_size_s * 1000
        self._max_throttle_ms = window_size_s * 1000
        self._broker_max_connections = max_connections
        self._default_max_per_ip = max_connections_per_ip
        self._max_per_ip: dict[str, int] = {}
        self.update_max_connections_per_ip_overrides(max_connections_per_ip_overrides or {})
        self._protected = protected_listener
        self._counts: dict[str, int] = {}
        self._total = 0
        self._listeners: dict[str, _ListenerQuota] = {}
        self._default_ip_rate = IP_CONNECTION_RATE_DEFAULT
        self._ip_rates: dict[str, int] = {}
        self._ip_sensors: dict[str, Sensor] = {}
        self._broker_rate = self._rate_sensor(
            "broker-connection-accept-rate", max_connection_creation_rate
        )

    # -- configuration ---------------------------------------------------------------------

    def add_listener(
        self, name: str, max_connections: int = INT_MAX, max_connection_creation_rate: int = INT_MAX
    ) -> None:
        if name in self._listeners:
            return
        self._listeners[name] = _ListenerQuota(
            max_connections=max_connections,
            rate=self._rate_sensor("connection-accept-rate", max_connection_creation_rate),
            throttle=self._avg_sensor("connection-accept-throttle-time"),
            ip_throttle=self._avg_sensor("ip-connection-accept-throttle-time"),
        )

    def configure_listener(
        self, name: str, max_connections: int = INT_MAX, max_connection_creation_rate: int = INT_MAX
    ) -> None:
        """Kafka's listener reconfiguration: an absent setting means no limit. Rates already
        recorded are kept; only the bound changes."""
        if max_connections <= 0:
            raise ValueError(f"Invalid max.connections {max_connections}")
        if max_connection_creation_rate <= 0:
            raise ValueError(f"Invalid max.connection.creation.rate {max_connection_creation_rate}")
        quota = self._listener(name)
        quota.max_connections = max_connections
        self._set_bound(quota.rate, max_connection_creation_rate)

    def remove_listener(self, name: str) -> None:
        self._listeners.pop(name, None)

    def update_broker_max_connections(self, max_connections: int) -> None:
        self._broker_max_connections = max_connections

    def update_broker_max_connection_rate(self, rate: int) -> None:
        self._set_bound(self._broker_rate, rate)

    def update_max_connections_per_ip(self, max_connections_per_ip: int) -> None:
        self._default_max_per_ip = max_connections_per_ip

    def update_max_connections_per_ip_overrides(self, overrides: Mapping[str, int]) -> None:
        self._max_per_ip = {canonical_ip(host): count for host, count in overrides.items()}

    def update_ip_connection_rate_quota(self, ip: str | None, rate: int | None) -> None:
        """Set (``rate``) or remove (None) the quota of one IP, or of the default IP (``ip``
        None). A removed IP falls back to the default; a removed default is no quota. The
        sensors of IPs the change applies to get the new bound and keep their history."""
        if ip is not None:
            address = canonical_ip(ip)
            if rate is None:
                self._ip_rates.pop(address, None)
            else:
                self._ip_rates[address] = rate
            sensor = self._ip_sensors.get(address)
            if sensor is not None:
                self._set_bound(sensor, self.connection_rate_for_ip(address))
            return
        self._default_ip_rate = IP_CONNECTION_RATE_DEFAULT if rate is None else rate
        for address, sensor in self._ip_sensors.items():
            bound = self.connection_rate_for_ip(address)
            if _bound(sensor) != bound:
                self._set_bound(sensor, bound)

    def connection_rate_for_ip(self, ip: str) -> int:
        return self._ip_rates.get(canonical_ip(ip), self._default_ip_rate)

    def max_connections_for_ip(self, ip: str) -> int:
        return self._max_per_ip.get(canonical_ip(ip), self._default_max_per_ip)

    def has_ip_rate_override(self, ip: str) -> bool:
        return canonical_ip(ip) in self._ip_rates

    def has_max_connections_override(self, ip: str) -> bool:
        return canonical_ip(ip) in self._max_per_ip

    # -- the acceptor's steps --------------------------------------------------------------

    def record_connection(self, listener: str, now_ms: int) -> int:
        """Record a new connection in the broker and listener rates; the milliseconds the
        acceptor must wait before it goes on (the longer of the two throttles), 0 if none.

        A protected listener (Kafka's inter-broker one) is held to its own rate only."""
        quota = self._listener(listener)
        throttle_ms = 0
        if not self._is_protected(listener):
            throttle_ms = self._record_and_get_throttle_ms(self._broker_rate, now_ms)
        throttle_ms = max(throttle_ms, self._record_and_get_throttle_ms(quota.rate, now_ms))
        if throttle_ms > 0:
            quota.throttle.record(throttle_ms, now_ms)
        return throttle_ms

    def slot_available(self, listener: str) -> bool:
        """Whether the listener and broker counts leave room for one more connection."""
        quota = self._listener(listener)
        if quota.count >= quota.max_connections:
            return False
        if self._is_protected(listener):
            return True
        return self._total < self._broker_max_connections

    def admit(self, listener: str, ip: str, now_ms: int) -> ConnectionAdmission:
        """The IP's turn, after the acceptor's wait: its creation rate, then its count."""
        quota = self._listener(listener)
        address = canonical_ip(ip)
        rate = self.connection_rate_for_ip(address)
        if rate != IP_CONNECTION_RATE_DEFAULT:
            sensor = self._ip_sensor(address, rate, now_ms)
            throttle_ms = self._record_and_get_throttle_ms(sensor, now_ms)
            if throttle_ms > 0:
                # Not accepted: it must not count in any rate, or the storm of one IP would
                # throttle the acceptor for everyone.
                sensor.record(-1.0, now_ms, check_quotas=False)
                if not self._is_protected(listener):
                    self._broker_rate.record(-1.0, now_ms, check_quotas=False)
                quota.ip_throttle.record(throttle_ms, now_ms)
                quota.rate.record(-1.0, now_ms, check_quotas=False)
                return ConnectionAdmission(AdmissionKind.THROTTLED, throttle_ms=throttle_ms)
        count = self._counts.get(address, 0)
        self._counts[address] = count + 1
        self._total += 1
        quota.count += 1
        limit = self.max_connections_for_ip(address)
        if count >= limit:
            return ConnectionAdmission(AdmissionKind.REFUSED, limit=limit)
        return ACCEPTED

    def dec(self, listener: str, ip: str) -> None:
        """A counted connection closed (or was refused)."""
        address = canonical_ip(ip)
        count = self._counts.get(address)
        if count is None:
            raise ValueError(
                "Attempted to decrease connection count for address with no connections, "
                f"address: {address}"
            )
        if count == 1:
            del self._counts[address]
        else:
            self._counts[address] = count - 1
        self._total -= 1
        quota = self._listeners.get(listener)
        if quota is not None and quota.count > 0:
            quota.count -= 1

    def get(self, ip: str) -> int:
        """Connections counted for an IP."""
        return self._counts.get(canonical_ip(ip), 0)

    @property
    def total(self) -> int:
        return self._total

    def listener_count(self, listener: str) -> int:
        return self._listener(listener).count

    def max_connections_exceeded(self, listener: str) -> bool:
        """Kafka closes a least recently used connection of another listener while this
        holds (only a protected listener can push the total past the maximum)."""
        return self._total > self._broker_max_connections and not self._is_protected(listener)

    # -- housekeeping and metrics ----------------------------------------------------------

    def expire_sensors(self, now_ms: int) -> list[str]:
        """Drop the rate sensors of IPs idle for an hour; the IPs dropped."""
        expired = [
            ip
            for ip, sensor in self._ip_sensors.items()
            if sensor.has_expired(now_ms, IP_SENSOR_EXPIRATION_S)
        ]
        for ip in expired:
            del self._ip_sensors[ip]
        return expired

    def broker_rate_metric(self) -> Sensor:
        return self._broker_rate

    def listener_rate_metric(self, listener: str) -> Sensor:
        return self._listener(listener).rate

    def listener_throttle_metric(self, listener: str) -> Sensor:
        return self._listener(listener).throttle

    def ip_throttle_metric(self, listener: str) -> Sensor:
        return self._listener(listener).ip_throttle

    def ip_rate_metric(self, ip: str) -> Sensor | None:
        return self._ip_sensors.get(canonical_ip(ip))

    def listeners(self) -> Iterator[str]:
        return iter(self._listeners)

    # -- internals -------------------------------------------------------------------------

    def _listener(self, name: str) -> _ListenerQuota:
        quota = self._listeners.get(name)
        if quota is None:
            raise KeyError(f"unknown listener {name!r}: add_listener first")
        return quota

    def _is_protected(self, listener: str) -> bool:
        return listener == self._protected and len(self._listeners) > 1

    def _ip_sensor(self, address: str, rate: int, now_ms: int) -> Sensor:
        sensor = self._ip_sensors.get(address)
        if sensor is None:
            sensor = self._rate_sensor("connection-accept-rate", rate, now_ms)
            self._ip_sensors[address] = sensor
        return sensor

    def _record_and_get_throttle_ms(self, sensor: Sensor, now_ms: int) -> int:
        try:
            sensor.record(1.0, now_ms)
        except QuotaViolation as violation:
            return bounded_throttle_time(violation, self._max_throttle_ms, now_ms)
        return 0

    def _rate_config(self, bound: int) -> MetricConfig:
        return MetricConfig(self._window_num, self._window_ms, Quota.upper_bound(bound))

    def _rate_sensor(self, metric_name: str, bound: int, created_ms: int = 0) -> Sensor:
        sensor = Sensor(metric_name, created_ms)
        sensor.add(metric_name, Rate(), self._rate_config(bound))
        return sensor

    def _set_bound(self, sensor: Sensor, bound: int) -> None:
        metric = sensor.metrics[0]
        metric.config = self._rate_config(bound)

    @staticmethod
    def _avg_sensor(metric_name: str) -> Sensor:
        # Kafka's default MetricConfig: 2 samples of 30 s.
        sensor = Sensor(metric_name)
        sensor.add(metric_name, Avg(), MetricConfig())
        return sensor


def _bound(sensor: Sensor) -> float | None:
    quota = sensor.metrics[0].config.quota
    return None if quota is None else quota.bound
