"""What tests read back from the gateway's log (pytest's ``caplog``)."""

from __future__ import annotations

import collections
import logging
import re
from collections.abc import Iterable

import pytest


def discovery_refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """ERROR lines of failed upstream discoveries: what a refused ``[upstream]`` login logs on
    every attempt (waiting will not fix it, so not a WARNING)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and "upstream_discovery_failed" in r.getMessage()
    ]


def upstream_reauthentications(lines: Iterable[str]) -> collections.Counter[str]:
    """How many times each connection's upstream link re-authenticated (KIP-368), by id."""
    return collections.Counter(
        match.group(1)
        for line in lines
        if (match := re.search(r"upstream_reauthenticated id=(\d+)", line))
    )
