"""How long to throttle a client that broke a rate quota (Kafka's ``QuotaUtils``)."""

from __future__ import annotations

import math

from quotagate.quota.java import java_round
from quotagate.quota.rate import Rate
from quotagate.quota.sensor import QuotaViolation


def throttle_time(violation: QuotaViolation, now_ms: int) -> int:
    """Milliseconds of delay X that bring the observed rate O back to the quota T.

    ``O * W / (W + X) = T`` gives ``X = (O - T) / T * W`` with W the rate's precise window
    at ``now_ms``. Negative when O < T; callers only ask on a violation.
    """
    stat = violation.metric.stat
    if not isinstance(stat, Rate):
        raise TypeError(f"metric {violation.metric.name} is not a Rate; cannot compute a throttle")
    window_ms = stat.window_size(violation.metric.config, now_ms)
    difference = violation.value - violation.bound
    if violation.bound == 0:
        # Java divides doubles by zero to infinity (a quota of 0 admits nothing); callers
        # cap the result with bounded_throttle_time.
        return java_round(math.copysign(math.inf, difference) * window_ms)
    return java_round(difference / violation.bound * window_ms)


def bounded_throttle_time(violation: QuotaViolation, max_throttle_ms: int, now_ms: int) -> int:
    return min(throttle_time(violation, now_ms), max_throttle_ms)
