"""KIP-219's choice among throttles: the largest wins, ties go to the request quota."""

from __future__ import annotations

import pytest

from quotagate.quota import choose_throttle
from quotagate.quota.throttle_choice import Cause

PRODUCE, FETCH, TOPIC = Cause.PRODUCE, Cause.FETCH, Cause.TOPIC_BYTES_IN


@pytest.mark.parametrize(
    ("request_ms", "others", "expected"),
    [
        (0, [], (0, "")),
        (0, [(PRODUCE, 0)], (0, "")),
        (5, [(PRODUCE, 5)], (5, "request")),  # a tie goes to the request quota
        (4, [(PRODUCE, 5)], (5, "produce")),
        (6, [(FETCH, 5)], (6, "request")),
        (0, [(PRODUCE, 7), (TOPIC, 7)], (7, "produce")),  # first listed wins
        (0, [(PRODUCE, 3), (TOPIC, 9)], (9, "topic_bytes_in")),
    ],
)
def test_choose_throttle(
    request_ms: int, others: list[tuple[Cause, int]], expected: tuple[int, str]
) -> None:
    assert choose_throttle(request_ms, others) == expected


def test_kip_219_max_ties_go_to_request() -> None:
    assert choose_throttle(0, [(PRODUCE, 0)]) == (0, "")
    assert choose_throttle(5, [(PRODUCE, 5)]) == (5, "request")
    assert choose_throttle(4, [(PRODUCE, 5), (TOPIC, 5)]) == (5, "produce")
    assert choose_throttle(4, [(PRODUCE, 3), (TOPIC, 6)]) == (6, "topic_bytes_in")
