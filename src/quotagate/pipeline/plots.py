"""The report's figures, each rendered to an inline SVG string (no files, no network)."""

from __future__ import annotations

import io
from typing import Final

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

UNITS: Final = {
    "produce": "bytes/s",
    "fetch": "bytes/s",
    "request": "% of a thread",
    "controller_mutation": "partitions/s",
}


def key_label(user: object, client: object) -> str:
    parts = [f"user={user}" if user else "", f"client={client}" if client else ""]
    return ", ".join(p for p in parts if p) or "(all)"


def top_entities(entities: pd.DataFrame, top: int = 12) -> str:
    types = [t for t in ("produce", "fetch", "request") if (entities["quota_type"] == t).any()]
    fig, axes = plt.subplots(1, max(1, len(types)), figsize=(5.2 * max(1, len(types)), 4.6))
    for ax, quota_type in zip(np.atleast_1d(axes), types, strict=False):
        rows = entities[entities["quota_type"] == quota_type].nlargest(top, "total")[::-1]
        labels = [
            key_label(u, c) for u, c in zip(rows["share_user"], rows["share_client"], strict=True)
        ]
        ax.barh(labels, rows["p99_sustained_rate"], color="#4c72b0", label="p99 sustained")
        ax.barh(labels, rows["p50_sustained_rate"], color="#dd8452", label="median sustained")
        ax.set_title(f"{quota_type} ({UNITS[quota_type]})")
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7, loc="lower right")
    return _svg(fig)


def rate_against_quota(
    series: pd.DataFrame, limits: dict[str, tuple[float | None, float | None]], title: str
) -> str:
    """``series``: key label, minute, rate; ``limits``: label -> (current, recommended)."""
    labels = list(dict.fromkeys(series["label"]))
    fig, axes = plt.subplots(
        len(labels), 1, figsize=(10, 2.1 * len(labels)), sharex=True, squeeze=False
    )
    for ax, label in zip(axes[:, 0], labels, strict=True):
        rows = series[series["label"] == label]
        times = pd.to_datetime(rows["minute_ms"], unit="ms", utc=True)
        ax.plot(
            times, rows["rate"], color="#4c72b0", linewidth=0.9, label="sustained rate (1-min max)"
        )
        current, recommended = limits.get(label, (None, None))
        if current is not None:
            ax.axhline(current, color="#c44e52", linestyle="--", linewidth=1, label="current quota")
        if recommended is not None:
            ax.axhline(
                recommended, color="#55a868", linestyle=":", linewidth=1.4, label="recommended"
            )
        ax.set_title(label, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper right")
    fig.suptitle(title, fontsize=10)
    return _svg(fig)


def throttle_heatmap(heatmap: pd.DataFrame, top: int = 20) -> str:
    totals = heatmap.groupby("label")["throttle_ms"].sum().nlargest(top)
    grid = (
        heatmap[heatmap["label"].isin(totals.index)]
        .pivot_table(
            index="label", columns="bucket", values="throttle_ms", aggfunc="sum", fill_value=0
        )
        .reindex(totals.index)
    )
    fig, ax = plt.subplots(figsize=(10, 0.32 * max(4, len(grid)) + 1.2))
    image = ax.imshow(np.log10(1 + grid.to_numpy(float) / 1000.0), aspect="auto", cmap="magma_r")
    ax.set_yticks(range(len(grid)), [str(i) for i in grid.index], fontsize=7)
    ax.set_xlabel("time bucket")
    fig.colorbar(image, ax=ax, label="log10(1 + throttle seconds)")
    ax.set_title("Predicted throttle per client over time")
    return _svg(fig)


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.tight_layout()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline in HTML
