"""The quota time of a request: read time, nudged to keep a connection's order, bounded."""

from __future__ import annotations

from quotagate.enforcement.runtime import MAX_STAMP_SKEW_MS, QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings

T0 = 1_700_000_000_000


def test_same_millisecond_requests_get_consecutive_stamps() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    assert [runtime._stamp(1, T0) for _ in range(3)] == [T0, T0 + 1, T0 + 2]
    assert runtime._stamp(2, T0) == T0  # other connections are independent
    assert runtime._stamp(1, T0 + 50) == T0 + 50


def test_the_nudge_never_runs_more_than_the_bound_ahead_of_the_wall_clock() -> None:
    runtime = QuotaRuntime(QuotaSettings())
    stamps = [runtime._stamp(1, T0) for _ in range(MAX_STAMP_SKEW_MS + 50)]
    assert max(stamps) == T0 + MAX_STAMP_SKEW_MS
    assert all(stamp - T0 <= MAX_STAMP_SKEW_MS for stamp in stamps)
    # Once the wall clock moves past the nudged stamps, stamps follow it again.
    assert runtime._stamp(1, T0 + MAX_STAMP_SKEW_MS + 1) == T0 + MAX_STAMP_SKEW_MS + 1
