"""``report``: one self-contained HTML file with interactive plots, no network at view time.

Reads what the other jobs wrote with pyarrow (no Spark needed): the rollup is required,
replay, recommendation and ingest report are shown when given. plotly.js is inlined once
(4.8 MB of the page); the data beside it is held to a byte budget by widening the time
buckets (report_series.py), so the page stays under 5 MB whatever the traffic.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds

from quotagate.pipeline.report import plots
from quotagate.pipeline.report.series import choose_grid, fit_to_budget, sparse_series
from quotagate.pipeline.tables import read_json, read_table
from quotagate.pipeline.tenants import TENANTS_DIR

PAGE_BYTES = 4_980_000
"""What a report may weigh: under 5 MB (decimal), with room for the explorers' framing."""
# plotly.js alone is 4.8 MB. The explorers' data gets what the rest of the page leaves of
# PAGE_BYTES (the rate explorer first, up to RATE_SHARE of it): more keys or clients, or a
# longer span, only make the time buckets wider (tests/pipeline/report/test_size.py).
RATE_SHARE = 0.6
_RATE_POINT_BYTES = 6  # a bucket step and a value of at most three digits, with commas
_THROTTLE_POINT_BYTES = 10  # a step and two values
THROTTLE_CLIENTS = 300
"""The most throttled clients the throttle explorer lists (their labels alone are ~35 bytes)."""
_KEY = ["quota_type", "share_user", "share_client"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:right}
td:first-child,th:first-child{text-align:left}
.facts td{text-align:left}.muted{color:#777;font-size:.85rem}
.pick{display:block;margin:.8rem 0 .3rem;font-size:.9rem}
.pick select{font-size:.9rem;max-width:40rem}
.explorer{min-height:420px}
"""


@dataclass(frozen=True, slots=True)
class ReportInputs:
    rollup: Path
    replay: Path | None = None
    recommendation: Path | None = None
    ingest_report: Path | None = None


_RATES = "\x00rates\x00"
_THROTTLES = "\x00throttles\x00"


def report(inputs: ReportInputs, out: str | Path) -> Path:
    # The explorers are made last, with the bytes the rest of the page leaves them.
    sections = [_overview(inputs), _top_entities(inputs), _tenants(inputs), _RATES]
    if inputs.replay is not None:
        sections.append(_replay(inputs.replay, _THROTTLES))
    if inputs.recommendation is not None:
        sections.append(_recommendations(inputs.recommendation))
    if inputs.ingest_report is not None:
        sections.append(_ingest(inputs.ingest_report))
    document = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<title>quotagate usage report</title>"
        f"<style>{_CSS}</style>{plots.plotly_script()}</head>"
        "<body><h1>quotagate usage report</h1>"
        + "".join(sections)
        + plots.explorer_script()
        + "</body></html>\n"
    )
    left = max(0, PAGE_BYTES - len(document.encode()))
    rates = _rates(inputs, int(left * RATE_SHARE) if inputs.replay is not None else left)
    document = document.replace(_RATES, rates)
    if inputs.replay is not None:
        left = max(0, PAGE_BYTES - len(document.encode()))
        document = document.replace(_THROTTLES, _throttles(inputs.replay, left))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(document, encoding="utf-8")
    return out


def _overview(inputs: ReportInputs) -> str:
    summary = read_json(inputs.rollup / "summary.json")
    first_ms, last_ms = summary.get("first_ts_ms"), summary.get("last_ts_ms")
    span = "no events"
    if first_ms is not None and last_ms is not None:
        first = pd.to_datetime(first_ms, unit="ms", utc=True)
        last = pd.to_datetime(last_ms, unit="ms", utc=True)
        span = f"{first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC"
    facts = {
        "events": f"{summary.get('events', 0):,}",
        "time span": span,
        "quota window": f"{summary.get('window_num')} × {summary.get('window_seconds')} s",
        "clients grouped by": str(summary.get("grouping")),
        "sharing keys": ", ".join(
            f"{k}: {v}" for k, v in sorted(summary.get("sharing_keys", {}).items())
        ),
    }
    return "<h2>Overview</h2>" + _facts(facts)


def _top_entities(inputs: ReportInputs) -> str:
    entities = read_table(inputs.rollup / "entities")
    return (
        "<h2>Top entities by usage</h2><p class='muted'>Sustained rate = usage over the "
        "last quota.window.num − 1 windows, what Kafka's Rate measures; percentiles over "
        "the windows in which the key was active. Pick the quota type above the chart; "
        "hover a bar for its value.</p>" + plots.top_entities(entities)
    )


def _tenants(inputs: ReportInputs) -> str:
    """The tenant view (issue 25): each tenant's members combined, per quota type, with its
    recommended tenant quota when a recommendation is given; nothing without tenants."""
    path = inputs.rollup / TENANTS_DIR / "entities"
    if not path.exists():
        return ""
    table = read_table(path).sort_values(["share_user", "quota_type"], ignore_index=True)
    columns = {
        "share_user": "tenant",
        "quota_type": "quota",
        "members": "members",
        "total": "total",
        "p99_sustained_rate": "p99 sustained",
        "max_sustained_rate": "max sustained",
        "quota_limit": "tenant quota",
        "throttled_requests": "throttled by the tenant quota",
    }
    recommended = (
        inputs.recommendation.with_name(inputs.recommendation.stem + ".tenants.parquet")
        if inputs.recommendation is not None
        else None
    )
    if recommended is not None and recommended.exists():
        proposals = read_table(recommended)[["tenant", "quota_type", "recommended"]]
        table = table.merge(
            proposals.rename(columns={"tenant": "share_user"}),
            on=["share_user", "quota_type"],
            how="left",
        )
        columns["recommended"] = "recommended"
    return (
        "<h2>Tenants</h2><p class='muted'>A tenant's usage is its members' combined usage, "
        "as its tenant quota measures it; members = most clients seen in one window.</p>"
        + _table(table, columns)
    )


def _rates(inputs: ReportInputs, byte_budget: int) -> str:
    entities = read_table(inputs.rollup / "entities")
    if entities.empty:
        return "<h2>Rate against quota over time</h2><p>No traffic.</p>"
    recommended = _recommended_by_key(inputs.recommendation)
    windows = (
        ds.dataset(str(inputs.rollup / "windows"), format="parquet")
        .to_table(columns=[*_KEY, "window_start_ms", "sustained_rate"])
        .to_pandas()
    )
    windows[_KEY] = windows[_KEY].fillna("")
    key_codes = windows.groupby(_KEY, sort=False).ngroup()
    order = {quota_type: i for i, quota_type in enumerate(plots.UNITS)}
    entities = entities.assign(
        _order=entities["quota_type"].map(order).fillna(len(order))
    ).sort_values(["_order", "total"], ascending=[True, False])
    labels = [
        plots.key_label(u, c)
        for u, c in zip(entities["share_user"], entities["share_client"], strict=True)
    ]

    def build(points: int) -> dict[str, Any]:
        grid = choose_grid(windows["window_start_ms"], key_codes, points)
        series = sparse_series(
            windows, grid, _KEY, "window_start_ms", {"v": ("sustained_rate", "max")}
        )
        items = []
        for label, row in zip(labels, entities.itertuples(index=False), strict=True):
            key = (row.quota_type, row.share_user or "", row.share_client or "")
            items.append(
                {
                    "label": label,
                    "group": row.quota_type,
                    "q": None if pd.isna(row.quota_limit) else float(row.quota_limit),
                    "r": recommended.get((row.quota_type, row.share_user, row.share_client)),
                    **series.get(key, {"b": [], "e": 0, "v": []}),
                }
            )
        return {"grid": grid.as_json(), "units": plots.UNITS, "items": items}

    data = fit_to_budget(byte_budget, labels, _RATE_POINT_BYTES, build)
    return (
        "<h2>Rate against quota over time</h2><p class='muted'>Every sharing key, by quota "
        f"type and busiest first. The line is the highest sustained rate in each "
        f"{data['grid']['label']} bucket; drag on the plot or the slider under it to zoom in "
        "time, double-click to zoom out.</p>"
        + plots.explorer("qg-rates", f"Sharing key ({len(labels)})", data)
    )


def _replay(replay_dir: Path, throttles: str) -> str:
    """``throttles``: the per-client explorer (made later, with the page's bytes left)."""
    summary = read_json(replay_dir / "summary.json")
    entities = read_table(replay_dir / "entities")
    heatmap = read_table(replay_dir / "heatmap")
    rejected = int(summary.get("rejected_mutation_requests", 0))
    agreement = 100 * float(summary.get("agreement_with_recorded", 0))
    facts = {
        "loop": str(summary.get("mode")),
        "events replayed": f"{summary.get('events', 0):,}",
        "throttled requests": f"{summary.get('throttled_requests', 0):,}",
        "rejected mutation requests (error 89)": f"{rejected:,}",
        "agreement with recorded throttle": f"{agreement:.2f} %",
    }
    parts = ["<h2>Replay of the candidate quotas</h2>", _facts(facts)]
    if not heatmap.empty and heatmap["throttle_ms"].sum() > 0:
        heatmap["label"] = heatmap["principal"] + " / " + heatmap["client_id"]
        parts.append(plots.throttle_heatmap(heatmap))
    parts.append(throttles)
    worst = entities.nlargest(15, "total_throttle_ms")
    parts.append(
        _table(
            worst,
            {
                "principal": "principal",
                "client_id": "client id",
                "requests": "requests",
                "throttled_fraction": "throttled",
                "total_throttle_ms": "total throttle ms",
                "max_throttle_ms": "max throttle ms",
                "delayed_bytes": "delayed bytes",
                "rejected_requests": "rejected",
            },
        )
    )
    return "".join(parts)


def _throttles(replay_dir: Path, byte_budget: int) -> str:
    """Recorded and replayed throttle of one client side by side, for the throttled ones."""
    clients = len(read_table(replay_dir / "entities"))
    table = ds.dataset(str(replay_dir / "requests"), format="parquet").to_table(
        columns=["principal", "client_id", "ts_ms", "replay_ts_ms", "throttle_ms",
                 "predicted_throttle_ms"],
        filter=(pc.field("throttle_ms") > 0) | (pc.field("predicted_throttle_ms") > 0),
    )  # fmt: skip
    frame = table.to_pandas()
    client = ["principal", "client_id"]
    # A throttle is drawn when it happened: the gateway's at the recorded time, the replay's
    # at the time the (closed-loop) replay read the request.
    points = pd.concat(
        [
            frame[[*client, "ts_ms", "throttle_ms"]]
            .rename(columns={"ts_ms": "t", "throttle_ms": "rec"})
            .assign(pred=0),
            frame[[*client, "replay_ts_ms", "predicted_throttle_ms"]]
            .rename(columns={"replay_ts_ms": "t", "predicted_throttle_ms": "pred"})
            .assign(rec=0),
        ],
        ignore_index=True,
    )
    points = points[(points["rec"] > 0) | (points["pred"] > 0)]
    totals = (
        points.groupby(client)[["pred", "rec"]].sum().sort_values(["pred", "rec"], ascending=False)
    )
    throttled = len(totals)
    totals = totals.head(THROTTLE_CLIENTS)
    points = points.merge(totals.index.to_frame(index=False), on=client)
    key_codes = points.groupby(client, sort=False).ngroup()
    labels = [f"{principal} / {client_id}" for principal, client_id in totals.index]

    def build(budget_points: int) -> dict[str, Any]:
        grid = choose_grid(points["t"], key_codes, budget_points)
        series = sparse_series(
            points, grid, client, "t", {"rec": ("rec", "sum"), "pred": ("pred", "sum")}
        )
        items = [
            {"label": label, **series[key]} for label, key in zip(labels, totals.index, strict=True)
        ]
        return {"grid": grid.as_json(), "items": items}

    data = fit_to_budget(byte_budget, labels, _THROTTLE_POINT_BYTES, build)
    listed = f"all {throttled}" if throttled == len(labels) else f"the {len(labels)} most throttled"
    return (
        "<h3>Recorded and replayed throttle per client</h3><p class='muted'>"
        f"{throttled} of {clients} clients were throttled by the gateway or in the replay; "
        f"{listed} are listed. Throttle seconds summed per {data['grid']['label']} bucket; the "
        "two agree where the candidate quotas are the ones the gateway ran with.</p>"
        + plots.explorer("qg-throttles", f"Client ({len(labels)})", data)
    )


def _recommendations(quota_file: Path) -> str:
    table = read_table(_recommendation_table(quota_file))
    summary_path = quota_file.with_name(quota_file.stem + ".summary.json")
    summary = read_json(summary_path) if summary_path.exists() else {}
    table = table.assign(
        entity=[
            plots.key_label(u, c)
            for u, c in zip(table["entity_user"], table["entity_client"], strict=True)
        ]
    )
    columns = {
        "entity": "entity",
        "quota_type": "quota",
        "observed": f"p{summary.get('percentile', '')} sustained",
        "current_limit": "current limit",
        "recommended": "recommended",
    }
    note = (
        f"<p class='muted'>Headroom × {summary.get('headroom', '?')}; "
        f"controller.quota.window.num = {summary.get('controller.quota.window.num', '?')}. "
        f"Apply with <code>quotagate quotas apply {html.escape(quota_file.name)}</code>.</p>"
    )
    return "<h2>Recommended quotas</h2>" + note + _table(table, columns)


def _ingest(path: Path) -> str:
    summary = read_json(path)
    facts = {k: f"{summary.get(k, 0):,}" for k in ("files", "lines", "events", "failed", "other")}
    samples = pd.DataFrame(summary.get("failed_samples", []), columns=["reason", "line"])
    samples["line"] = samples["line"].str.slice(0, 160)
    return "<h2>Ingest</h2>" + _facts(facts) + _table(samples, {"reason": "reason", "line": "line"})


def _recommended_by_key(quota_file: Path | None) -> dict[tuple[Any, Any, Any], float]:
    if quota_file is None:
        return {}
    table = read_table(_recommendation_table(quota_file))
    return {
        (r.quota_type, r.share_user, r.share_client): float(r.recommended)
        for r in table.itertuples(index=False)
    }


def _recommendation_table(quota_file: Path) -> Path:
    return quota_file.with_name(quota_file.stem + ".recommendations.parquet")


def _facts(facts: dict[str, str]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts.items()
    )
    return f"<table class='facts'>{rows}</table>"


def _table(frame: pd.DataFrame, columns: dict[str, str]) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for title in columns.values())
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(row[c]))}</td>" for c in columns) + "</tr>"
        for _, row in frame.iterrows()
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
