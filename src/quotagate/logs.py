"""Structured logs with the standard library: one ``event=name key=value ...`` line each.

``kv(...)`` builds the message lazily, so a disabled DEBUG line costs one small object.
"""

from __future__ import annotations

import logging
from typing import Any


class kv:  # noqa: N801 - used like a formatting function
    __slots__ = ("_event", "_fields")

    def __init__(self, event: str, **fields: Any) -> None:
        self._event = event
        self._fields = fields

    def __str__(self) -> str:
        parts = [f"event={self._event}"]
        for key, value in self._fields.items():
            parts.append(f"{key}={_format(value)}")
        return " ".join(parts)


def error_text(exc: BaseException) -> str:
    """An exception as a log value that is never empty (a bare timeout has no message)."""
    return str(exc) or type(exc).__name__


def _format(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n\t'):
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    return text


def configure_logging(level: str, worker: int | None = None) -> None:
    """Log lines to stderr; a worker of a multi-process instance names itself in each."""
    who = "" if worker is None else f"worker={worker} "
    logging.basicConfig(
        level=getattr(logging, level),
        format=f"%(asctime)s level=%(levelname)s logger=%(name)s {who}%(message)s",
    )
