"""The report's figures: interactive plotly charts, their JavaScript inlined (no network).

plotly.js itself goes into the page once (:func:`plotly_script`); each figure is a ``<div>``
and the call that draws it. The explorers (a key chosen from a list, its series drawn) keep
their data as inert JSON in the page and draw with a few lines of our own script
(``report.js``), so the page holds each point once rather than one trace per key.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Final

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from quotagate.quota.entity import desanitize_user

UNITS: Final = {
    "produce": "bytes/s",
    "fetch": "bytes/s",
    "request": "% of a thread",
    "controller_mutation": "partitions/s",
}
_CONFIG: Final = {"displaylogo": False, "responsive": True}
# plotly's default template weighs ~10 kB per figure; these few settings are all we use.
_LAYOUT: Final = {
    "template": go.layout.Template(),
    "font": {"family": "system-ui, sans-serif", "size": 11, "color": "#222"},
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
    "margin": {"l": 10, "r": 10, "t": 40, "b": 40},
    "hoverlabel": {"namelength": -1},
}
_AXIS: Final = {"gridcolor": "#e5e5e5", "zerolinecolor": "#bbb", "automargin": True}
BLUE, ORANGE, RED, GREEN = "#4c72b0", "#dd8452", "#c44e52", "#55a868"


def key_label(user: object, client: object) -> str:
    """A sharing key or entity as a person reads it: ``user=team@corp, client=etl``.

    Users are stored sanitised as Kafka's metric tags are (``team%40corp``); shown decoded.
    """
    name = desanitize_user(str(user)) if user else ""
    parts = [f"user={name}" if name else "", f"client={client}" if client else ""]
    return ", ".join(p for p in parts if p) or "(all)"


def plotly_script() -> str:
    """plotly.js, inline: the page draws without fetching anything."""
    return f"<script>{get_plotlyjs()}</script>"


def explorer_script() -> str:
    source = resources.files("quotagate.pipeline.report").joinpath("report.js").read_text("utf-8")
    return f"<script>{source}</script>"


def top_entities(entities: pd.DataFrame, top: int = 15) -> str:
    """p99 and median sustained rate of the busiest keys, one quota type at a time."""
    types = [t for t in UNITS if (entities["quota_type"] == t).any()]
    if not types:
        return "<p>No traffic.</p>"
    fig = go.Figure()
    tallest = 0
    for index, quota_type in enumerate(types):
        rows = entities[entities["quota_type"] == quota_type].nlargest(top, "total")[::-1]
        labels = [
            key_label(u, c) for u, c in zip(rows["share_user"], rows["share_client"], strict=True)
        ]
        tallest = max(tallest, len(labels))
        for column, name, color in (
            ("p99_sustained_rate", "p99 sustained", BLUE),
            ("p50_sustained_rate", "median sustained", ORANGE),
        ):
            fig.add_trace(
                go.Bar(
                    x=rows[column].astype(float),
                    y=labels,
                    name=name,
                    orientation="h",
                    marker_color=color,
                    visible=index == 0,
                    legendgroup=name,
                    hovertemplate=f"%{{y}}<br>{name}: %{{x:,.4~g}} {UNITS[quota_type]}"
                    "<extra></extra>",
                )
            )
    buttons = [
        {
            "label": f"{quota_type} ({UNITS[quota_type]})",
            "method": "update",
            "args": [
                {"visible": [i // 2 == index for i in range(2 * len(types))]},
                {"xaxis.title.text": UNITS[quota_type]},
            ],
        }
        for index, quota_type in enumerate(types)
    ]
    fig.update_layout(
        **_LAYOUT,
        height=120 + 24 * tallest,
        barmode="overlay",
        updatemenus=[{"buttons": buttons, "x": 0, "y": 1.12, "xanchor": "left"}],
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.12},
        xaxis={**_AXIS, "title": {"text": UNITS[types[0]]}},
        yaxis={**_AXIS, "tickfont": {"size": 10}},
    )
    return _div(fig, "qg-top-entities")


def throttle_heatmap(heatmap: pd.DataFrame, top: int = 20) -> str:
    """Replayed throttle seconds per client and time bucket, the most throttled first."""
    totals = heatmap.groupby("label")["throttle_ms"].sum().nlargest(top)
    grid = (
        heatmap[heatmap["label"].isin(totals.index)]
        .pivot_table(
            index="label",
            columns="bucket_start_ms",
            values="throttle_ms",
            aggfunc="sum",
            fill_value=0,
        )
        .reindex(totals.index[::-1])
    )
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(float) / 1000.0,
            x=pd.to_datetime(grid.columns, unit="ms", utc=True),
            y=[str(label) for label in grid.index],
            colorscale="Magma",
            reversescale=True,
            colorbar={"title": {"text": "throttle s"}},
            hovertemplate="%{y}<br>%{x}<br>%{z:,.1f} s throttled<extra></extra>",
        )
    )
    fig.update_layout(
        **_LAYOUT,
        height=140 + 22 * len(grid),
        title={"text": "Replayed throttle per client over time"},
        xaxis=_AXIS,
        yaxis={**_AXIS, "tickfont": {"size": 10}},
    )
    return _div(fig, "qg-heatmap")


def explorer(element_id: str, title: str, data: dict[str, Any]) -> str:
    """A list of every item and a plot of the chosen one, drawn by ``report.js``."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    # Inert JSON inside <script>: only "</" could end it early (a client id may hold it).
    text = text.replace("</", "<\\/")
    return (
        f"<label class='pick'>{title} <select id='{element_id}-select'></select></label>"
        f"<div id='{element_id}' class='explorer'></div>"
        f"<script type='application/json' id='{element_id}-data'>{text}</script>"
    )


def _div(fig: go.Figure, element_id: str) -> str:
    return str(
        pio.to_html(
            fig,
            include_plotlyjs=False,
            full_html=False,
            div_id=element_id,
            config=_CONFIG,
            default_height=f"{fig.layout.height or 450}px",
        )
    )
