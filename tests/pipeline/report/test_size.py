"""The report stays under 5 MB however large the traffic: its data is held to a budget.

Spark is too slow here to run the pipeline over 500 000 events in the suite (about two
minutes on two shared cores; benchmarks/pipeline.py measures that, BENCHMARKS.md has the
figure), so the stage tables of a 500 000-event day are written directly, in the columns the
report reads, and made harder than the generator's: five times its sharing keys, ten times
its clients, every client throttled both by the gateway and in the replay (the throttle
explorer then lists the most throttled ``THROTTLE_CLIENTS``; every sharing key stays).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from quotagate.pipeline.report.job import THROTTLE_CLIENTS, ReportInputs, report

EVENTS = 500_000
DAY_MS = 86_400_000
START_MS = 1_704_067_200_000
LIMIT = 5_000_000  # bytes: "under 5 MB", read in decimal megabytes, the stricter reading


def _write(frame: pd.DataFrame, directory: Path) -> None:
    directory.mkdir(parents=True)
    frame.to_parquet(directory / "part-0.parquet", index=False)


def _stage_tables(work: Path) -> ReportInputs:
    rng = np.random.default_rng(16)
    keys = pd.DataFrame(
        {
            "quota_type": np.repeat(["produce", "fetch", "request", "controller_mutation"], 100),
            "share_user": [f"team-{i:03d}@corp" for i in range(400)],
            "share_client": "",
        }
    )
    keys["share_user"] = keys["share_user"].str.replace("@", "%40")  # as the engine keys them
    # 500 000 events land in about 680 000 (key, one-second window) rows, as the real day does.
    windows = keys.sample(680_000, replace=True, random_state=1).reset_index(drop=True)
    windows["window_start_ms"] = START_MS + rng.integers(0, DAY_MS // 1000, len(windows)) * 1000
    windows["sustained_rate"] = rng.lognormal(8, 2, len(windows))
    _write(windows, work / "rollup" / "windows")
    entities = keys.assign(
        entity_user=keys["share_user"],
        entity_client=None,
        quota_limit=50_000.0,
        total=rng.lognormal(12, 2, len(keys)),
        p99_sustained_rate=rng.lognormal(9, 1, len(keys)),
        p50_sustained_rate=rng.lognormal(7, 1, len(keys)),
    )
    _write(entities, work / "rollup" / "entities")
    (work / "rollup" / "summary.json").write_text(
        json.dumps(
            {
                "events": EVENTS,
                "first_ts_ms": START_MS,
                "last_ts_ms": START_MS + DAY_MS - 1,
                "window_num": 11,
                "window_seconds": 1,
                "grouping": "quota file",
                "sharing_keys": {"produce": 100, "fetch": 100, "request": 100},
            }
        )
    )
    clients = 1000
    requests = pd.DataFrame(
        {
            "principal": [f"User:team-{i % clients % 400:03d}@corp" for i in range(EVENTS)],
            "client_id": [f"client-{i % clients}" for i in range(EVENTS)],
            "ts_ms": START_MS + rng.integers(0, DAY_MS, EVENTS),
            "throttle_ms": np.where(rng.random(EVENTS) < 0.3, rng.integers(1, 3000, EVENTS), 0),
            "predicted_throttle_ms": np.where(
                rng.random(EVENTS) < 0.3, rng.integers(1, 3000, EVENTS), 0
            ),
        }
    )
    requests["replay_ts_ms"] = requests["ts_ms"] + rng.integers(0, 500, EVENTS)
    _write(requests, work / "replay" / "requests")
    per_client = requests.groupby(["principal", "client_id"], as_index=False).agg(
        requests=("ts_ms", "size"),
        total_throttle_ms=("predicted_throttle_ms", "sum"),
        max_throttle_ms=("predicted_throttle_ms", "max"),
    )
    per_client = per_client.assign(throttled_fraction=0.3, delayed_bytes=0, rejected_requests=0)
    _write(per_client, work / "replay" / "entities")
    width = DAY_MS // 48 + 1
    heatmap = (
        requests.assign(bucket=(requests["ts_ms"] - START_MS) // width)
        .groupby(["principal", "client_id", "bucket"], as_index=False)
        .agg(throttle_ms=("predicted_throttle_ms", "sum"), requests=("ts_ms", "size"))
    )
    heatmap["bucket_start_ms"] = heatmap["bucket"] * width + START_MS
    _write(heatmap, work / "replay" / "heatmap")
    (work / "replay" / "summary.json").write_text(
        json.dumps({"mode": "open", "events": EVENTS, "agreement_with_recorded": 0.5})
    )
    # A recommendation for every key: its table is part of the page too.
    recommended = entities[["quota_type", "share_user", "share_client"]].assign(
        entity_user=entities["share_user"],
        entity_client=None,
        observed=entities["p99_sustained_rate"],
        current_limit=50_000.0,
        recommended=(entities["p99_sustained_rate"] * 1.5).round(),
    )
    recommended.to_parquet(work / "rec.recommendations.parquet", index=False)
    (work / "rec.toml").write_text("")
    (work / "rec.summary.json").write_text(json.dumps({"percentile": 99, "headroom": 1.5}))
    return ReportInputs(work / "rollup", work / "replay", work / "rec.toml")


def test_a_day_of_500k_events_makes_a_report_under_5_mb(tmp_path: Path) -> None:
    html = report(_stage_tables(tmp_path), tmp_path / "report.html")
    size = html.stat().st_size
    print(f"report of {EVENTS:,} events: {size:,} bytes")
    assert size < LIMIT
    text = html.read_text()
    rates = _data(text, "qg-rates")
    # Nothing was dropped to fit: every sharing key is there, at a coarser time resolution.
    assert len(rates["items"]) == 400
    assert rates["grid"]["n"] <= 1500
    throttles = _data(text, "qg-throttles")
    assert len(throttles["items"]) == THROTTLE_CLIENTS
    assert "1000 of 1000 clients were throttled" in text
    requests = pd.read_parquet(tmp_path / "replay" / "requests")
    requests["label"] = requests["principal"] + " / " + requests["client_id"]
    listed = requests[requests["label"].isin({item["label"] for item in throttles["items"]})]
    shown = sum(
        sum(value * 10 ** item["e"] for value in item["pred"]) for item in throttles["items"]
    )
    assert shown == pytest.approx(float(listed["predicted_throttle_ms"].sum()), rel=0.01)


def _data(text: str, element_id: str) -> dict[str, Any]:
    found = re.search(
        rf"<script type='application/json' id='{element_id}-data'>(.*?)</script>", text, re.S
    )
    assert found is not None
    return dict(json.loads(found[1]))
