"""How much fuzzing a run does.

``make test`` runs a small fixed budget, derandomized, so the suite is deterministic and
stays well under a minute. ``make fuzz`` sets ``QUOTAGATE_FUZZ=1`` and any of
``QUOTAGATE_FUZZ_CASES`` (socket and live cases; 100 000 unless a time is given) and
``QUOTAGATE_FUZZ_SECONDS`` (a wall-clock budget shared out between the tests), fuzzes every
schema kio models rather than the ones the gateway decodes, and draws fresh random examples.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Share of QUOTAGATE_FUZZ_SECONDS each test may use.
SHARES: Final = {
    "round_trip": 0.05,
    "oauthbearer": 0.05,
    "tenant_rules": 0.02,
    "ingest": 0.03,
    "sasl": 0.05,
    "lies": 0.27,
    "sockets": 0.2,
    "live": 0.33,
}
ROUND_TRIP_TESTS: Final = 180  # (request/response) x API key parametrisations, about
_CHUNK: Final = 10  # examples per hypothesis run under a time budget


@dataclass(frozen=True, slots=True)
class Budget:
    fuzzing: bool
    """True under ``make fuzz``: random seeds, every schema."""
    cases: int
    """Hostile connections, for the socket test and for the live test each."""
    lie_frames: int
    """Valid frames whose every truncation and length lie the child process decodes."""
    round_trip_examples: int
    """Hypothesis examples per API and direction for the valid-body round trip."""
    seconds: float | None

    def deadline(self, test: str) -> float | None:
        """``time.monotonic()`` after which ``test`` should stop drawing cases, if any."""
        if self.seconds is None:
            return None
        share = self.seconds * SHARES[test]
        if test == "round_trip":
            share /= ROUND_TRIP_TESTS
        return time.monotonic() + share


def from_environment() -> Budget:
    if os.environ.get("QUOTAGATE_FUZZ") != "1":
        return Budget(False, cases=250, lie_frames=16, round_trip_examples=2, seconds=None)
    seconds_text = os.environ.get("QUOTAGATE_FUZZ_SECONDS", "")
    cases_text = os.environ.get("QUOTAGATE_FUZZ_CASES", "")
    seconds = float(seconds_text) if seconds_text else None
    # Without a case count, a time budget alone decides; without either, 100 000 cases.
    default_cases = 10**9 if seconds is not None else 100_000
    cases = int(cases_text) if cases_text else default_cases
    return Budget(
        True,
        cases=cases,
        lie_frames=max(cases // 200, 16),
        round_trip_examples=max(min(cases // 1000, 10**6), 2),
        seconds=seconds,
    )


def expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def run_examples(
    body: Callable[[st.DataObject], None], examples: int, budget: Budget, test: str
) -> int:
    """Run hypothesis over ``body`` for ``examples`` examples or until the test's deadline.

    Under a time budget the examples run in short hypothesis runs, each a fresh random one,
    checking the clock in between: a single run cannot be stopped early, and with a time
    budget alone ``examples`` is all but unbounded. Returns how many examples were asked for.
    """
    deadline = budget.deadline(test)
    chunk = examples if deadline is None else min(examples, _CHUNK)
    done = 0
    while done < examples and not expired(deadline):
        count = min(chunk, examples - done)
        run = settings(
            max_examples=count,
            deadline=None,
            database=None,
            derandomize=not budget.fuzzing,
            suppress_health_check=list(HealthCheck),
        )(given(st.data())(body))
        run()
        done += count
    return done
