"""Request-time quotas (KIP-124): thread time as a percentage of one thread."""

from __future__ import annotations

from typing import Final

from quotagate.quota.client_quota_manager import ClientQuotaManager
from quotagate.quota.metric_config import MetricConfig
from quotagate.quota.quota_type import QuotaType
from quotagate.quota.rate import Rate
from quotagate.quota.sensor import Sensor

_NANOS_TO_PERCENTAGE_PER_SECOND: Final = 100.0 / 1_000_000_000


def nanos_to_percentage(nanos: float) -> float:
    """10 ms of thread time in a 1 s window is 1 % of one thread."""
    return nanos * _NANOS_TO_PERCENTAGE_PER_SECOND


class RequestQuotaManager(ClientQuotaManager):
    """``request_percentage`` quotas, throttles capped at one window, and the exempt sensor.

    Time spent on exempt requests is recorded in one shared ``exempt-request-time`` rate
    that is never throttled and never expires.
    """

    def __init__(self, window_num: int = 11, window_size_s: int = 1) -> None:
        super().__init__(QuotaType.REQUEST, window_num, window_size_s)
        self.exempt_sensor = Sensor("exempt-Request")
        self.exempt_sensor.add("exempt-request-time", Rate(), MetricConfig())

    @property
    def max_throttle_ms(self) -> int:
        return self.window_size_s * 1000

    def record_nanos_and_get_throttle_ms(
        self, user: str, client_id: str, thread_time_ns: int, now_ms: int
    ) -> int:
        # nanos_to_percentage inlined: this runs for every request of gateway and replay.
        return self.record_and_get_throttle_ms(
            user, client_id, thread_time_ns * _NANOS_TO_PERCENTAGE_PER_SECOND, now_ms
        )

    def record_nanos_no_throttle(
        self, user: str, client_id: str, thread_time_ns: int, now_ms: int
    ) -> None:
        """Time that counts against the quota from the next request on (network time)."""
        self.record_no_throttle(user, client_id, nanos_to_percentage(thread_time_ns), now_ms)

    def record_exempt(self, thread_time_ns: int, now_ms: int) -> None:
        if self.quotas_enabled:
            self.exempt_sensor.record(
                nanos_to_percentage(thread_time_ns), now_ms, check_quotas=False
            )

    def exempt_rate(self, now_ms: int) -> float:
        return self.exempt_sensor.metrics[0].peek(now_ms)
