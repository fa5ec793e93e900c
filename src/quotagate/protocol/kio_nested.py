"""Reaching the nested entity classes of a kio schema (e.g. a response's per-topic result)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any


def nested(schema: type[Any], name: str) -> Any:
    """The class ``name`` defined next to ``schema`` in kio's generated module."""
    return getattr(sys.modules[schema.__module__], name)


def build(cls: Any, **fields: Any) -> Any:
    """An instance of ``cls`` from the fields this version has (others are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})
