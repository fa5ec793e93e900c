"""Spec §9.7 (throttled channels) and §9.8 (ExponentialBackoff)."""

from __future__ import annotations

import math
import random

import pytest

from quotagate.quota import ExponentialBackoff, ThrottledChannels

T0 = 1_700_000_000_000


def test_throttled_channel_delays() -> None:
    channels: ThrottledChannels[str] = ThrottledChannels()
    channels.add("a", 10, T0)
    channels.add("b", 20, T0)
    channels.add("c", 20, T0)
    assert channels.delays(T0) == [10, 20, 20]
    assert channels.delays(T0 + 10) == [0, 10, 10]
    assert channels.delays(T0 + 20) == [-10, 0, 0]
    assert channels.queue_size == 3
    assert channels.due(T0 + 9) == []
    assert channels.due(T0 + 10) == ["a"]
    assert channels.due(T0 + 20) == ["b", "c"]
    assert channels.queue_size == 0
    channels.add("zero", 0, T0)
    assert len(channels) == 0


class _Fixed:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("initial", "maximum", "expected"),
    [
        (100, 400, [100, 200, 400, 400, 400, 400, 400]),
        (100, 1000, [100, 200, 400, 800, 1000, 1000, 1000]),
        (50, 1000, [50, 100, 200, 400, 800, 1000, 1000]),
        (1000, 100, [100] * 7),
        (100, 100, [100] * 7),
        (0, 1000, [0] * 7),
    ],
)
def test_backoff_sequences_without_jitter(initial: int, maximum: int, expected: list[int]) -> None:
    backoff = ExponentialBackoff(initial, 2, maximum, 0.0)
    assert [backoff.backoff(attempt) for attempt in range(7)] == expected


@pytest.mark.parametrize(("initial", "maximum"), [(1000, 100), (100, 100)])
def test_constant_backoff_has_no_jitter(initial: int, maximum: int) -> None:
    for draw in (0.0, 0.5, 0.999):
        backoff = ExponentialBackoff(initial, 2, maximum, 0.2, rng=_Fixed(draw))
        assert {backoff.backoff(a) for a in range(10)} == {100}


def test_backoff_with_jitter_ranges() -> None:
    backoff = ExponentialBackoff(100, 2, 1000, 0.2, rng=random.Random(580))
    ranges = [(80, 119), (160, 239), (320, 479), (640, 959), (800, 1000), (800, 1000)]
    for attempt, (low, high) in enumerate(ranges):
        values = [backoff.backoff(attempt) for _ in range(2000)]
        assert low <= min(values) and max(values) <= high
    capped = [backoff.backoff(8) for _ in range(2000)]
    assert 0.4 < capped.count(1000) / len(capped) < 0.6  # about half is clipped at the cap


def test_backoff_jitter_extremes_and_fractional_exponent() -> None:
    low = ExponentialBackoff(100, 2, 1000, 0.2, rng=_Fixed(0.0))
    high = ExponentialBackoff(100, 2, 1000, 0.2, rng=_Fixed(0.999999))
    assert [low.backoff(a) for a in range(5)] == [80, 160, 320, 640, 800]
    assert [high.backoff(a) for a in range(5)] == [119, 239, 479, 959, 1000]
    # At the cap the un-jittered term is max up to floating point: 100 * 2**log2(10).
    assert 100 * 2 ** math.log2(10) == pytest.approx(1000)
    assert ExponentialBackoff(100, 2, 1000, 0.0).backoff(50) == 1000


def test_kafka_unit_test_bounds() -> None:
    backoff = ExponentialBackoff(100, 2, 2000, 0.2, rng=random.Random(1))
    for attempt in range(11):
        value = backoff.backoff(attempt)
        if attempt <= 4:
            assert 0.8 * 100 * 2**attempt <= value <= 1.2 * 100 * 2**attempt
        else:
            assert value <= 2000


def test_reconnect_backoff_with_defaults() -> None:
    backoff = ExponentialBackoff(50, 2, 1000, 0.2, rng=random.Random(7))
    for failures in range(10):
        expected = round(50 * 2 ** min(failures, math.log2(20)))
        assert abs(backoff.backoff(failures) - expected) <= 0.2 * expected
        assert backoff.backoff(failures) <= 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [((-1, 2, 10, 0.2), ">= 0"), ((1, 1, 10, 0.2), "multiplier"), ((1, 2, 10, 1.5), "jitter")],
)
def test_backoff_rejects_nonsense(args: tuple[int, int, int, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExponentialBackoff(*args)
