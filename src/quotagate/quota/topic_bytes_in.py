"""Per-topic bytes-in thresholds (the broker-side quota design, seed 002).

A gateway-wide ``total.bytes.in.per.sec.threshold`` and per-topic
``bytes.in.per.sec.threshold`` values; topics without an explicit threshold share what the
explicit ones leave of the total equally. Produce data for a topic is refused only while
*both* the total rate and the topic's rate are over their thresholds, both rates being
one-minute EWMAs. Refused and erroneous bytes are metered apart from accepted ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from quotagate.quota.ewma_meter import TICK_INTERVAL_MS, EwmaMeter

TOTAL_THRESHOLD_KEY: Final = "total.bytes.in.per.sec.threshold"
TOPIC_THRESHOLD_KEY: Final = "bytes.in.per.sec.threshold"

# How far ahead to look for the rates to decay when computing a throttle: 10 minutes.
_MAX_PROJECTED_TICKS: Final = 120


class ThresholdError(ValueError):
    """A threshold change the design refuses (the explicit sum would exceed the total)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    topic: str
    total_rate: float
    total_threshold: float
    topic_rate: float
    topic_threshold: float

    def __str__(self) -> str:
        return (
            f"topic {self.topic!r} refused: total bytes-in {self.total_rate:.0f} B/s > "
            f"{self.total_threshold:.0f} and topic bytes-in {self.topic_rate:.0f} B/s > "
            f"{self.topic_threshold:.0f}"
        )


class TopicBytesInQuota:
    def __init__(self, total_threshold: float | None, now_ms: int) -> None:
        if total_threshold is not None and total_threshold <= 0:
            raise ThresholdError(f"{TOTAL_THRESHOLD_KEY} must be greater than 0")
        self._total_threshold = total_threshold
        self._explicit: dict[str, float] = {}
        self._topics: set[str] = set()
        self._default_share = 0.0
        self.total_meter = EwmaMeter(now_ms)
        self.error_meter = EwmaMeter(now_ms)
        self.throttled_meter = EwmaMeter(now_ms)
        self.topic_meters: dict[str, EwmaMeter] = {}
        self.accepted: dict[str, int] = {}
        """Bytes this process accepted per topic, ever: what a fleet tells its peers."""

    # -- thresholds ------------------------------------------------------------------------

    @property
    def total_threshold(self) -> float | None:
        return self._total_threshold

    @property
    def explicit_thresholds(self) -> dict[str, float]:
        return dict(self._explicit)

    def set_total_threshold(self, value: float | None) -> None:
        if value is not None:
            if value <= 0:
                raise ThresholdError(f"{TOTAL_THRESHOLD_KEY} must be greater than 0")
            explicit_sum = sum(self._explicit.values())
            if explicit_sum > value:
                raise ThresholdError(
                    f"{TOTAL_THRESHOLD_KEY}={value:g} is below the sum of the per-topic "
                    f"thresholds ({explicit_sum:g}); lower those first"
                )
        self._total_threshold = value
        self._recompute_default_share()

    def set_topic_threshold(self, topic: str, value: float | None) -> None:
        """Set or (``None``) remove a topic's explicit threshold."""
        if value is not None:
            if value <= 0:
                raise ThresholdError(f"{TOPIC_THRESHOLD_KEY} of {topic!r} must be greater than 0")
            others = sum(v for t, v in self._explicit.items() if t != topic)
            if self._total_threshold is not None and others + value > self._total_threshold:
                raise ThresholdError(
                    f"{TOPIC_THRESHOLD_KEY}={value:g} for {topic!r} would make the per-topic "
                    f"thresholds sum to {others + value:g}, above "
                    f"{TOTAL_THRESHOLD_KEY}={self._total_threshold:g}"
                )
            self._explicit[topic] = value
        else:
            self._explicit.pop(topic, None)
        self._topics.add(topic)
        self._recompute_default_share()

    def add_topic(self, topic: str) -> None:
        if topic not in self._topics:
            self._topics.add(topic)
            self._recompute_default_share()

    def remove_topic(self, topic: str) -> None:
        self._topics.discard(topic)
        self._explicit.pop(topic, None)
        self.topic_meters.pop(topic, None)
        self._recompute_default_share()

    def threshold_for(self, topic: str) -> float | None:
        """The topic's threshold: explicit, else the equal share of what is left of the total."""
        explicit = self._explicit.get(topic)
        if explicit is not None:
            return explicit
        if self._total_threshold is None:
            return None
        if topic not in self._topics:
            return self._share_with(extra_topics=1)
        return self._default_share

    # -- the data path -------------------------------------------------------------------

    def check(self, topic: str, now_ms: int) -> Refusal | None:
        """Would data for ``topic`` be refused now? (Both rates over, as the seed's TopicQuota.)"""
        self.add_topic(topic)
        total_threshold = self._total_threshold
        if total_threshold is None:
            return None
        total_rate = self.total_meter.one_minute_rate(now_ms)
        if total_rate <= total_threshold:
            return None
        topic_threshold = self._explicit.get(topic, self._default_share)
        topic_rate = self._topic_meter(topic, now_ms).one_minute_rate(now_ms)
        if topic_rate <= topic_threshold:
            return None
        return Refusal(topic, total_rate, total_threshold, topic_rate, topic_threshold)

    def record(self, topic: str, size: int, now_ms: int) -> bool:
        """The seed's ``recordQuota``: refuse (record nothing) or record the accepted bytes."""
        if self.check(topic, now_ms) is not None:
            return False
        self.record_accepted(topic, size, now_ms)
        return True

    def record_accepted(self, topic: str, size: int, now_ms: int) -> None:
        self.accepted[topic] = self.accepted.get(topic, 0) + size
        self.total_meter.mark(size, now_ms)
        self._topic_meter(topic, now_ms).mark(size, now_ms)

    def record_remote(self, topic: str, size: int, now_ms: int) -> None:
        """Bytes another worker of the fleet accepted for ``topic``."""
        self.total_meter.mark(size, now_ms)
        self._topic_meter(topic, now_ms).mark(size, now_ms)

    def record_error(self, size: int, now_ms: int) -> None:
        self.error_meter.mark(size, now_ms)

    def record_throttled(self, size: int, now_ms: int) -> None:
        self.throttled_meter.mark(size, now_ms)

    def throttle_ms(self, topic: str, now_ms: int) -> int:
        """How long until ``topic`` would be accepted again if nothing more arrived.

        Both meters decay only at ticks, so the answer is the wait until the first tick at
        which either rate is at or below its threshold (0 when accepted now).
        """
        if self.check(topic, now_ms) is None:
            return 0
        total_threshold = self._total_threshold
        topic_threshold = self.threshold_for(topic)
        assert total_threshold is not None and topic_threshold is not None
        # check() just brought both meters up to now_ms; each decays from its own next tick.
        meters = (
            (self.total_meter, total_threshold),
            (self._topic_meter(topic, now_ms), topic_threshold),
        )
        best: int | None = None
        for meter, threshold in meters:
            for ticks, rate in enumerate(meter.projected_rates(_MAX_PROJECTED_TICKS), start=1):
                if rate <= threshold:
                    due = meter.ticked_by_ms(ticks) - now_ms
                    best = due if best is None else min(best, due)
                    break
        return best if best is not None else _MAX_PROJECTED_TICKS * TICK_INTERVAL_MS

    def topic_rate(self, topic: str, now_ms: int) -> float:
        """The topic's one-minute rate as a metric: read without ticking the meter."""
        meter = self.topic_meters.get(topic)
        return meter.peek_one_minute_rate(now_ms) if meter is not None else 0.0

    # -- internals -------------------------------------------------------------------------

    def _topic_meter(self, topic: str, now_ms: int) -> EwmaMeter:
        meter = self.topic_meters.get(topic)
        if meter is None:
            # Like a broker's per-topic meter, it starts when the topic is first seen.
            meter = self.topic_meters[topic] = EwmaMeter(now_ms)
        return meter

    def _share_with(self, extra_topics: int) -> float:
        assert self._total_threshold is not None
        implicit = len(self._topics - self._explicit.keys()) + extra_topics
        left = self._total_threshold - sum(self._explicit.values())
        return left / implicit if implicit else left

    def _recompute_default_share(self) -> None:
        self._default_share = self._share_with(0) if self._total_threshold is not None else 0.0
