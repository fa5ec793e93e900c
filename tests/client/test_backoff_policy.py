"""KIP-580 in the admin client: which backoff each purpose uses and how attempts are counted
(spec §7.2, §7.3, vectors of §9.8), under a seeded random source."""

from __future__ import annotations

import logging
import math
import random

import pytest

from quotagate.client import AdminClient
from quotagate.client.backoff_policy import (
    CallBackoff,
    ReconnectState,
    SetupTimeoutState,
    connection_setup_timeout,
    reconnect_backoff,
    retry_backoff,
)
from quotagate.client.config import AdminConfig, reconnect_backoff_bounds
from quotagate.protocol.host_port import HostPort

BOOTSTRAP = (HostPort("127.0.0.1", 9092),)
SEED = 580


def _config(**settings: int) -> AdminConfig:
    return AdminConfig(BOOTSTRAP, **settings)  # type: ignore[arg-type]


def _expected(initial: int, maximum: int, attempts: int, draws: random.Random) -> list[int]:
    """Java's formula restated: jitter factor in [0.8, 1.2), fractional exponent cap, clip."""
    exp_max = math.log(maximum / initial) / math.log(2)
    return [
        min(int((0.8 + 0.4 * draws.random()) * initial * 2 ** min(n, exp_max)), maximum)
        for n in range(attempts)
    ]


def test_retry_backoff_sequence_of_an_admin_call_under_a_seeded_rng() -> None:
    calls = CallBackoff(retry_backoff(_config(), random.Random(SEED)))
    delays = [calls.next_delay_ms() for _ in range(12)]
    assert delays == _expected(100, 1000, 12, random.Random(SEED))
    assert calls.tries == 12


def test_first_retry_of_a_call_waits_about_retry_backoff_ms() -> None:
    # Call.fail: backoff(tries++), so the first failure waits backoff(0) ∈ [80, 120).
    for seed in range(200):
        calls = CallBackoff(retry_backoff(_config(), random.Random(seed)))
        assert 80 <= calls.next_delay_ms() < 120


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(0, 80, 119), (1, 160, 239), (2, 320, 479), (3, 640, 959), (4, 800, 1000), (9, 800, 1000)],
)
def test_retry_backoff_bounds(attempt: int, low: int, high: int) -> None:
    backoff = retry_backoff(_config(), random.Random(SEED))
    values = [backoff.backoff(attempt) for _ in range(2000)]
    assert low <= min(values)
    assert max(values) <= high
    if attempt >= 4:
        # Jitter before the clip: about half of the draws sit exactly on the maximum.
        assert 0.4 < values.count(1000) / len(values) < 0.6


def test_retry_backoff_larger_than_its_maximum_warns_and_is_constant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="quotagate.client.backoff_policy"):
        backoff = retry_backoff(_config(retry_backoff_ms=2000), random.Random(SEED))
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert "'retry.backoff.ms' with value '2000'" in message
    assert "static backoff with value '1000'" in message
    calls = CallBackoff(backoff)
    assert [calls.next_delay_ms() for _ in range(10)] == [1000] * 10


def test_equal_retry_backoffs_are_constant_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="quotagate.client.backoff_policy"):
        backoff = retry_backoff(_config(retry_backoff_ms=300, retry_backoff_max_ms=300))
    assert caplog.records == []
    assert {backoff.backoff(n) for n in range(10)} == {300}


def test_reconnect_defaults_and_the_max_follows_an_explicit_initial_rule() -> None:
    assert reconnect_backoff_bounds(_config()) == (50, 1000)
    # Only reconnect.backoff.ms set: the maximum becomes it, so the backoff is constant.
    assert reconnect_backoff_bounds(_config(reconnect_backoff_ms=100)) == (100, 100)
    assert reconnect_backoff_bounds(_config(reconnect_backoff_max_ms=400)) == (50, 400)
    assert reconnect_backoff_bounds(
        _config(reconnect_backoff_ms=100, reconnect_backoff_max_ms=1000)
    ) == (100, 1000)
    constant = reconnect_backoff(_config(reconnect_backoff_ms=100), random.Random(SEED))
    assert {constant.backoff(n) for n in range(10)} == {100}


def test_reconnect_backoff_after_consecutive_failures() -> None:
    # ClusterConnectionStatesTest.testExponentialReconnectBackoff, exactly, then bounds.
    state = ReconnectState(reconnect_backoff(_config(), random.Random(SEED)))
    draws = random.Random(SEED)
    draws.random()  # the constructor draws backoff(0) for the fresh node state
    now = 0.0
    observed = []
    for _ in range(10):
        state.connecting(now)
        state.failed(now)
        observed.append(state.backoff_ms)
        assert state.delay_ms(now) == state.backoff_ms
        now += state.backoff_ms
        assert state.delay_ms(now) == 0
    assert observed == _expected(50, 1000, 10, draws)
    for failure, backoff_ms in enumerate(observed):
        nominal = round(50 * 2 ** min(failure, math.log2(20)))
        assert abs(backoff_ms - nominal) <= 0.2 * nominal
        assert backoff_ms <= 1000


def test_reconnect_backoff_resets_when_the_node_becomes_ready() -> None:
    state = ReconnectState(reconnect_backoff(_config(), random.Random(SEED)))
    assert state.delay_ms(0) == 0  # never tried: connect at once
    for _ in range(5):
        state.connecting(0)
        state.failed(0)
    assert state.failed_attempts == 5
    assert state.backoff_ms >= 640
    state.ready()
    assert state.failed_attempts == 0
    assert 40 <= state.backoff_ms <= 60
    # A later disconnect starts again from backoff(0).
    state.failed(10_000)
    assert 40 <= state.backoff_ms <= 60
    assert state.delay_ms(10_000) == state.backoff_ms


def test_connection_setup_timeout_doubles_from_the_first_failure() -> None:
    state = SetupTimeoutState(connection_setup_timeout(_config(), random.Random(SEED)))
    assert 8_000 <= state.timeout_ms <= 12_000
    state.timed_out()  # failedConnectAttempts++ then backoff(failedConnectAttempts)
    assert 16_000 <= state.timeout_ms <= 24_000
    state.timed_out()
    assert 24_000 <= state.timeout_ms <= 30_000
    state.ready()
    assert 8_000 <= state.timeout_ms <= 12_000


def test_the_admin_client_warns_when_it_is_built_with_such_a_config(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="quotagate.client.backoff_policy"):
        AdminClient(_config(retry_backoff_ms=5000, retry_backoff_max_ms=1000))
    (record,) = caplog.records
    assert "A static backoff with value '1000' will be applied" in record.getMessage()
