"""A one-minute exponentially weighted moving average, ticked every 5 s.

This is the Dropwizard/Yammer ``Meter`` the broker-side quota design reads through
``getOneMinuteRate()``: marks accumulate between ticks; a tick folds them into the
average as an instant rate over the 5 s interval. Ticks happen lazily on mark or read,
once per whole interval elapsed (strictly more than the interval, like Dropwizard's
``tickIfNecessary``), so the meter is a pure function of the times it is given.
"""

from __future__ import annotations

import math
from typing import Final

TICK_INTERVAL_MS: Final = 5_000
_ONE_MINUTE_ALPHA: Final = 1 - math.exp(-(TICK_INTERVAL_MS / 1000) / 60)


class EwmaMeter:
    __slots__ = ("_initialized", "_last_tick_ms", "_rate", "_uncounted", "count", "start_ms")

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.count = 0
        self._last_tick_ms = start_ms
        self._uncounted = 0.0
        self._rate = 0.0
        self._initialized = False

    def mark(self, n: float, now_ms: int) -> None:
        self._tick_if_necessary(now_ms)
        self.count += int(n)
        self._uncounted += n

    def one_minute_rate(self, now_ms: int) -> float:
        """Events (bytes) per second."""
        self._tick_if_necessary(now_ms)
        return self._rate

    def peek_one_minute_rate(self, now_ms: int) -> float:
        """``one_minute_rate`` without ticking this meter (reads move Dropwizard's tick phase)."""
        twin = EwmaMeter(self.start_ms)
        twin.count = self.count
        twin._last_tick_ms = self._last_tick_ms
        twin._uncounted = self._uncounted
        twin._rate = self._rate
        twin._initialized = self._initialized
        return twin.one_minute_rate(now_ms)

    def mean_rate(self, now_ms: int) -> float:
        elapsed_s = (now_ms - self.start_ms) / 1000.0
        return self.count / elapsed_s if elapsed_s > 0 else 0.0

    def ticked_by_ms(self, ticks: int) -> int:
        """The first time at which a read will have ticked the average ``ticks`` more times.

        One tick needs strictly more than an interval; after that, ``age // interval`` ticks
        happen at once, so the k-th tick (k >= 2) is due exactly k intervals on.
        """
        return self._last_tick_ms + max(ticks * TICK_INTERVAL_MS, TICK_INTERVAL_MS + 1)

    def projected_rates(self, ticks: int) -> list[float]:
        """The one-minute rate after each of the next ``ticks`` ticks if nothing more is marked.

        Lets a caller say how long a rate needs to decay below a threshold without
        advancing the meter.
        """
        rates = []
        rate, initialized, uncounted = self._rate, self._initialized, self._uncounted
        for _ in range(ticks):
            rate, initialized = _ticked(rate, initialized, uncounted)
            uncounted = 0.0
            rates.append(rate)
        return rates

    def _tick_if_necessary(self, now_ms: int) -> None:
        age = now_ms - self._last_tick_ms
        if age <= TICK_INTERVAL_MS:
            return
        self._last_tick_ms = now_ms - age % TICK_INTERVAL_MS
        for _ in range(min(age // TICK_INTERVAL_MS, _TICKS_TO_FORGET)):
            self._rate, self._initialized = _ticked(self._rate, self._initialized, self._uncounted)
            self._uncounted = 0.0
        if age // TICK_INTERVAL_MS > _TICKS_TO_FORGET:
            self._rate = 0.0


# After this many idle ticks the average is below 1e-300 of its value; stop iterating.
_TICKS_TO_FORGET: Final = 10_000


def _ticked(rate: float, initialized: bool, uncounted: float) -> tuple[float, bool]:
    instant = uncounted / (TICK_INTERVAL_MS / 1000)
    if initialized:
        return rate + _ONE_MINUTE_ALPHA * (instant - rate), True
    return instant, True
