"""KIP-599 burst sizing: how deep a token bucket must be for observed mutation storms.

A bucket refilled at R mutations/s admits a storm as long as it never has to go below
zero *before* a request (strict mode accepts a request whole while tokens are >= 0). The
deficit a storm builds is a leaky-bucket backlog; the deepest backlog is the burst the
bucket must hold, and ``controller.quota.window.num`` sets that depth: R x num x size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

KAFKA_DEFAULT_WINDOW_NUM = 11


def deepest_backlog(times_s: Sequence[float], mutations: Sequence[float], rate: float) -> float:
    """Largest backlog (mutations not yet paid for) just before any request arrives."""
    backlog = 0.0
    deepest = 0.0
    last = None
    for t, n in zip(times_s, mutations, strict=True):
        if last is not None:
            backlog = max(0.0, backlog - rate * (t - last))
        deepest = max(deepest, backlog)
        backlog += n
        last = t
    return deepest


def window_num_for(backlog: float, rate: float, window_size_s: int) -> int:
    """The smallest ``controller.quota.window.num`` whose bucket holds ``backlog``."""
    if rate <= 0:
        return KAFKA_DEFAULT_WINDOW_NUM
    return max(1, math.ceil(backlog / (rate * window_size_s)))
