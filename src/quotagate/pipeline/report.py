"""``report``: one self-contained HTML file (inline SVG, inline CSS, no scripts, no network).

Reads what the other stages wrote (small tables only, with pyarrow; no Spark needed):
the rollup is required, replay, recommendation and ingest report are shown when given.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds

from quotagate.pipeline import plots
from quotagate.pipeline.tables import read_json, read_table

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:right}
td:first-child,th:first-child{text-align:left}
.facts td{text-align:left}.muted{color:#777;font-size:.85rem}
svg{max-width:100%;height:auto}
"""


@dataclass(frozen=True, slots=True)
class ReportInputs:
    rollup: Path
    replay: Path | None = None
    recommendation: Path | None = None
    ingest_report: Path | None = None


def report(inputs: ReportInputs, out: str | Path) -> Path:
    sections = [_overview(inputs), _top_entities(inputs), _rates(inputs)]
    if inputs.replay is not None:
        sections.append(_replay(inputs.replay))
    if inputs.recommendation is not None:
        sections.append(_recommendations(inputs.recommendation))
    if inputs.ingest_report is not None:
        sections.append(_ingest(inputs.ingest_report))
    document = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<title>quotagate usage report</title>"
        f"<style>{_CSS}</style></head><body><h1>quotagate usage report</h1>"
        + "".join(sections)
        + "</body></html>\n"
    )
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
        "the windows in which the key was active.</p>" + plots.top_entities(entities)
    )


def _rates(inputs: ReportInputs) -> str:
    entities = read_table(inputs.rollup / "entities")
    recommended = _recommended_by_key(inputs.recommendation)
    picks = pd.concat(
        [
            entities[entities["quota_type"] == t].nlargest(n, "total")
            for t, n in (("produce", 3), ("fetch", 2), ("controller_mutation", 1))
        ]
    )
    if picks.empty:
        return "<h2>Rate against quota</h2><p>No produce or fetch traffic.</p>"
    frames: list[pd.DataFrame] = []
    limits: dict[str, tuple[float | None, float | None]] = {}
    windows = ds.dataset(str(inputs.rollup / "windows"), format="parquet")
    for row in picks.itertuples(index=False):
        label = f"{row.quota_type}: {plots.key_label(row.entity_user, row.entity_client)}"
        table = windows.to_table(
            columns=["window_start_ms", "sustained_rate"],
            filter=(ds.field("quota_type") == row.quota_type)
            & (ds.field("share_user") == row.share_user)
            & (ds.field("share_client") == row.share_client),
        ).to_pandas()
        minute = (table["window_start_ms"] // 60_000) * 60_000
        series = table.groupby(minute)["sustained_rate"].max().reset_index()
        series.columns = ["minute_ms", "rate"]
        series["label"] = label
        frames.append(series)
        current = None if pd.isna(row.quota_limit) else float(row.quota_limit)
        limits[label] = (
            current,
            recommended.get((row.quota_type, row.share_user, row.share_client)),
        )
    return "<h2>Rate against quota over time</h2>" + plots.rate_against_quota(
        pd.concat(frames), limits, "busiest sharing keys"
    )


def _replay(replay_dir: Path) -> str:
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
