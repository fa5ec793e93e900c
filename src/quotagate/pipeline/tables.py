"""Small helpers for the Parquet tables and JSON summaries jobs write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from quotagate.pipeline.errors import PipelineError


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PipelineError(f"cannot read {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise PipelineError(f"{path} is not a JSON object")
    return loaded


def read_table(path: Path) -> pd.DataFrame:
    """A (small) Parquet table written by a job, as pandas."""
    if not path.exists():
        raise PipelineError(f"{path} not found: run the job that writes it first")
    return pq.read_table(str(path)).to_pandas()
