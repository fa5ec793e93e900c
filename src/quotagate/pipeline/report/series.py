"""The report's time series: every key's values per time bucket, held to a size budget.

A report must stay small whatever the traffic (one file, mailed around, opened offline), so
the bucket width is not fixed: it is the finest of a ladder of round widths at which every
key's non-empty buckets fit ``budget`` points together. A key's points are written sparse
(bucket steps and values) with three significant digits; the page fills the gaps with zeros.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd

_S: Final = 1000
BUCKET_LADDER_MS: Final = (
    _S, 5 * _S, 10 * _S, 30 * _S, 60 * _S, 120 * _S, 300 * _S, 600 * _S, 900 * _S,
    1800 * _S, 3600 * _S, 7200 * _S, 10_800 * _S, 21_600 * _S, 43_200 * _S, 86_400 * _S,
    7 * 86_400 * _S,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Grid:
    start_ms: int
    width_ms: int
    buckets: int

    def as_json(self) -> dict[str, int | str]:
        return {"t0": self.start_ms, "w": self.width_ms, "n": self.buckets, "label": self.label}

    @property
    def label(self) -> str:
        """``1 min``, ``15 min``, ``1 h``: how the page names a bucket."""
        seconds = self.width_ms // 1000
        for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
            if seconds >= size and seconds % size == 0:
                return f"{seconds // size} {unit}"
        return f"{seconds} s"


MAX_BUCKETS: Final = 1500
"""Buckets across the whole time span: what the page draws per series (dense, with zeros)."""


def choose_grid(
    times_ms: pd.Series, keys: pd.Series, budget: int, max_buckets: int = MAX_BUCKETS
) -> Grid:
    """The finest ladder width at which the distinct (key, bucket) pairs fit ``budget`` and
    the whole span fits ``max_buckets``.

    ``keys``: one integer per row naming its key (``DataFrame.groupby(...).ngroup()``).
    """
    if times_ms.empty:
        return Grid(0, BUCKET_LADDER_MS[0], 0)
    lo, hi = int(times_ms.min()), int(times_ms.max())
    codes = keys.to_numpy(np.int64)
    times = times_ms.to_numpy(np.int64)
    width = BUCKET_LADDER_MS[-1]
    for candidate in BUCKET_LADDER_MS:
        span = (hi // candidate) - (lo // candidate) + 1
        if span > max_buckets:
            continue
        points = np.unique(codes * span + (times // candidate - lo // candidate)).size
        if points <= budget:
            width = candidate
            break
    start = lo // width * width
    return Grid(start, width, (hi - start) // width + 1)


def sparse_series(
    frame: pd.DataFrame,
    grid: Grid,
    key_columns: Sequence[str],
    time_column: str,
    values: dict[str, tuple[str, str]],
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per key: ``b`` (steps between non-empty buckets), ``e`` (a power of ten) and one list
    of integers per ``values`` entry, each value being ``integer × 10**e``.

    ``values``: output name -> (column, aggregation), e.g. ``{"v": ("rate", "max")}``. The
    integers keep three significant digits of the key's largest value (a plot cannot show
    more), so each is at most three characters.
    """
    if frame.empty:
        return {}
    bucket = (frame[time_column].to_numpy(np.int64) - grid.start_ms) // grid.width_ms
    grouped = (
        frame.assign(_bucket=bucket)
        .groupby([*key_columns, "_bucket"], sort=True, dropna=False)
        .agg(**{name: spec for name, spec in values.items()})
        .reset_index()
    )
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, rows in grouped.groupby(list(key_columns), sort=False, dropna=False):
        key_tuple = key if isinstance(key, tuple) else (key,)
        buckets = rows["_bucket"].to_numpy(np.int64)
        columns = {name: np.nan_to_num(rows[name].to_numpy(float)) for name in values}
        exponent = scale_exponent(max(float(np.abs(c).max(initial=0)) for c in columns.values()))
        series: dict[str, Any] = {"b": np.diff(buckets, prepend=0).tolist(), "e": exponent}
        for name, column in columns.items():
            series[name] = np.rint(column / 10.0**exponent).astype(np.int64).tolist()
        out[key_tuple] = series
    return out


def scale_exponent(largest: float) -> int:
    """The power of ten that leaves ``largest`` three digits: 123 456 -> 3 (123 × 10³)."""
    if largest <= 0 or not np.isfinite(largest):
        return 0
    return int(np.floor(np.log10(largest))) - 2


def points_budget(byte_budget: int, labels: Sequence[str], bytes_per_point: int) -> int:
    """How many points fit once every item's label and framing are paid for."""
    framing = sum(len(label.encode()) + 40 for label in labels)
    return max(len(labels), (byte_budget - framing) // bytes_per_point)


def fit_to_budget(
    byte_budget: int,
    labels: Sequence[str],
    bytes_per_point: int,
    build: Callable[[int], dict[str, Any]],
) -> dict[str, Any]:
    """``build(points)``'s data, with ``points`` lowered until its JSON fits ``byte_budget``
    (or every item is down to about one point: the labels themselves are never dropped)."""
    points = points_budget(byte_budget, labels, bytes_per_point)
    data = build(points)
    for _ in range(4):
        size = len(json.dumps(data, separators=(",", ":")).encode())
        if size <= byte_budget or points <= len(labels):
            break
        points = max(len(labels), int(points * byte_budget / size * 0.95))
        data = build(points)
    return data
