"""KIP-599 bucket sizing from mutation storms."""

from __future__ import annotations

from quotagate.pipeline.recommend.burst import deepest_backlog, window_num_for


def test_a_storm_builds_a_backlog_that_drains_at_the_rate() -> None:
    # 30 partitions at t=0 and t=1 s, rate 10/s: before the second request 20 are unpaid.
    assert deepest_backlog([0.0, 1.0], [30, 30], 10.0) == 20.0
    # Far apart, the bucket refills completely.
    assert deepest_backlog([0.0, 100.0], [30, 30], 10.0) == 0.0


def test_window_num_holds_the_backlog() -> None:
    assert window_num_for(20.0, 10.0, 1) == 2
    assert window_num_for(200.0, 10.0, 1) == 20
    assert window_num_for(0.0, 10.0, 1) == 1
