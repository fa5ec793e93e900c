"""The report's time series: the finest bucket width that fits, written sparse and scaled."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from quotagate.pipeline.report.series import (
    Grid,
    choose_grid,
    fit_to_budget,
    scale_exponent,
    sparse_series,
)

T0 = 1_704_067_200_000
HOUR = 3_600_000


def _frame() -> pd.DataFrame:
    # Two keys over one hour: "a" every second, "b" in one burst of a minute.
    a = pd.DataFrame({"key": "a", "t": [T0 + s * 1000 for s in range(3600)], "v": 10.0})
    b = pd.DataFrame({"key": "b", "t": [T0 + 600_000 + s * 1000 for s in range(60)], "v": 5e6})
    return pd.concat([a, b], ignore_index=True)


def test_the_finest_width_whose_points_fit() -> None:
    frame = _frame()
    codes = frame.groupby("key").ngroup()
    # 3660 points fit at 1 s, but an hour of 1 s buckets is more than 1500 to draw.
    assert choose_grid(frame["t"], codes, 10_000).width_ms == 5000
    assert choose_grid(frame["t"], codes, 10_000, max_buckets=4000).width_ms == 1000
    grid = choose_grid(frame["t"], codes, 200)  # 1 min: 60 + 1 points; 30 s: 120 + 2 fit too
    assert grid.width_ms == 30_000 and grid.label == "30 s"
    assert grid.buckets == 120 and grid.start_ms == T0
    # However many points the budget allows, the span never has more than max_buckets.
    assert choose_grid(frame["t"], codes, 10_000, max_buckets=100).width_ms == 60_000
    assert Grid(T0, 2 * HOUR, 1).label == "2 h"


def test_sparse_steps_and_three_digit_values() -> None:
    frame = _frame()
    grid = Grid(T0, 60_000, 60)
    series = sparse_series(frame, grid, ["key"], "t", {"v": ("v", "max"), "n": ("v", "size")})
    a, b = series[("a",)], series[("b",)]
    assert a["b"] == [0] + [1] * 59 and a["e"] == -1 and a["v"] == [100] * 60  # 100 × 10⁻¹
    assert b["b"] == [10] and b["e"] == 4 and b["v"] == [500]  # 5e6 = 500 × 10⁴
    assert b["n"] == [0]  # 60 events, scaled with the key's exponent: counts need their own key


def test_scale_exponent() -> None:
    assert [scale_exponent(v) for v in (999, 1000, 123_456, 0.5, 0, float("nan"))] == [
        0,
        1,
        3,
        -3,
        0,
        0,
    ]


def test_fit_to_budget_narrows_until_the_json_fits() -> None:
    frame = _frame()
    codes = frame.groupby("key").ngroup()

    def build(points: int) -> dict[str, object]:
        grid = choose_grid(frame["t"], codes, points)
        return {
            "grid": grid.as_json(),
            "s": sparse_series(frame, grid, ["key"], "t", {"v": ("v", "max")}).get(("a",)),
        }

    for budget in (50_000, 5_000, 1_000):
        size = len(json.dumps(fit_to_budget(budget, ["a", "b"], 1, build), separators=(",", ":")))
        assert size <= budget
    with pytest.raises(AssertionError):
        assert len(json.dumps(build(100_000))) <= 1_000
