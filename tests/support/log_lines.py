"""What tests read back from the gateway's log (pytest's ``caplog``)."""

from __future__ import annotations

import logging

import pytest


def discovery_refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """ERROR lines of failed upstream discoveries: what a refused ``[upstream]`` login logs on
    every attempt (waiting will not fix it, so not a WARNING)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and "upstream_discovery_failed" in r.getMessage()
    ]
