"""KIP-580 exponential backoff with jitter, as Kafka's ``ExponentialBackoff`` computes it."""

from __future__ import annotations

import math
import random
import sys
from typing import Protocol

# Java's Double.MIN_NORMAL: jitter below it counts as "no jitter".
_DOUBLE_MIN_NORMAL = sys.float_info.min


class RandomSource(Protocol):
    def random(self) -> float:
        """A float uniformly drawn from [0, 1)."""
        ...


class ExponentialBackoff:
    """``initial * multiplier ** attempts``, jittered, never above ``max_ms``.

    Stateless: the caller counts attempts. Three details matter for fidelity:
    when ``initial_ms >= max_ms`` the backoff is a constant with no jitter; the exponent
    saturates at a *fractional* value so the un-jittered term lands exactly on the cap;
    jitter is applied before clipping, so about half of the draws at the cap equal it.
    """

    __slots__ = ("_exp_max", "_initial", "_jitter", "_max", "_multiplier", "_rng")

    def __init__(
        self,
        initial_ms: int,
        multiplier: float,
        max_ms: int,
        jitter: float,
        rng: RandomSource | None = None,
    ) -> None:
        if initial_ms < 0 or max_ms < 0:
            raise ValueError("backoff intervals must be >= 0 ms")
        if multiplier <= 1:
            raise ValueError("the backoff multiplier must be > 1")
        if not 0 <= jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        self._initial = min(max_ms, initial_ms)
        self._multiplier = multiplier
        self._max = max_ms
        self._jitter = jitter
        self._exp_max = (
            math.log(max_ms / max(initial_ms, 1)) / math.log(multiplier)
            if max_ms > initial_ms
            else 0.0
        )
        self._rng: RandomSource = rng if rng is not None else random.Random()

    @property
    def initial_ms(self) -> int:
        return self._initial

    @property
    def max_ms(self) -> int:
        return self._max

    def backoff(self, attempts: int) -> int:
        """Milliseconds to wait before the attempt after ``attempts`` failures."""
        if self._exp_max == 0:
            return self._initial
        exponent = min(float(attempts), self._exp_max)
        term = self._initial * self._multiplier**exponent
        factor = 1.0
        if self._jitter >= _DOUBLE_MIN_NORMAL:
            factor = 1 - self._jitter + 2 * self._jitter * self._rng.random()
        return min(int(factor * term), self._max)

    def __repr__(self) -> str:
        return (
            f"ExponentialBackoff(initial_ms={self._initial}, multiplier={self._multiplier}, "
            f"max_ms={self._max}, jitter={self._jitter})"
        )
