"""The quota time of a request: read time, nudged to keep a connection's order, bounded."""

from __future__ import annotations

from quotagate.enforcement.stamps import MAX_STAMP_SKEW_MS, ConnectionStamps

T0 = 1_700_000_000_000


def test_same_millisecond_requests_get_consecutive_stamps() -> None:
    stamps = ConnectionStamps()
    assert [stamps.stamp(1, T0) for _ in range(3)] == [T0, T0 + 1, T0 + 2]
    assert stamps.stamp(2, T0) == T0  # other connections are independent
    assert stamps.stamp(1, T0 + 50) == T0 + 50


def test_the_nudge_never_runs_more_than_the_bound_ahead_of_the_wall_clock() -> None:
    stamps = ConnectionStamps()
    seen = [stamps.stamp(1, T0) for _ in range(MAX_STAMP_SKEW_MS + 50)]
    assert max(seen) == T0 + MAX_STAMP_SKEW_MS
    assert all(stamp - T0 <= MAX_STAMP_SKEW_MS for stamp in seen)
    # Once the wall clock moves past the nudged stamps, stamps follow it again.
    assert stamps.stamp(1, T0 + MAX_STAMP_SKEW_MS + 1) == T0 + MAX_STAMP_SKEW_MS + 1


def test_forgetting_stamps_behind_the_clock_keeps_order_for_connections_ahead() -> None:
    stamps = ConnectionStamps()
    stamps.stamp(1, T0)
    stamps.stamp(1, T0)  # connection 1 is now 1 ms ahead
    stamps.forget_before(T0 + 1)
    assert stamps.stamp(1, T0 + 1) == T0 + 2
    stamps.forget_before(T0 + 10)
    assert stamps.stamp(1, T0) == T0  # forgotten: the read time stands


def test_a_tenants_connections_get_consecutive_stamps_in_reading_order() -> None:
    stamps = ConnectionStamps()
    # Three members' connections read in one millisecond: spread in the order they were read.
    assert [stamps.stamp(c, T0, "team") for c in (3, 1, 2)] == [T0, T0 + 1, T0 + 2]
    assert stamps.stamp(4, T0) == T0  # outside the tenant: its own connection only
    assert stamps.stamp(5, T0, "other") == T0  # another tenant is independent
    # A connection keeps its own order too: its next request is after its nudged stamp.
    assert stamps.stamp(1, T0, "team") == T0 + 3
    assert stamps.stamp(1, T0 + 1) == T0 + 4


def test_the_tenant_nudge_is_bounded_and_forgotten_behind_the_clock() -> None:
    stamps = ConnectionStamps()
    seen = [stamps.stamp(c, T0, "team") for c in range(MAX_STAMP_SKEW_MS + 50)]
    assert max(seen) == T0 + MAX_STAMP_SKEW_MS
    stamps.forget_before(T0 + MAX_STAMP_SKEW_MS + 1)
    assert stamps.stamp(10_000, T0 + 5, "team") == T0 + 5
