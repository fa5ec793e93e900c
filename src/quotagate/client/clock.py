"""The admin client's notion of now: monotonic milliseconds, injectable for tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

Clock: TypeAlias = Callable[[], float]
"""Returns milliseconds on a clock that never goes backwards."""


def monotonic_ms() -> float:
    return time.monotonic_ns() / 1_000_000
