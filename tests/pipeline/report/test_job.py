"""The HTML report: self-contained, and it renders in headless Chromium without errors."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.ingest.job import ingest
from quotagate.pipeline.recommend.job import RecommendOptions, recommend
from quotagate.pipeline.replay.job import replay
from quotagate.pipeline.report.job import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.usage.schema import USAGE_SCHEMA

from ..conftest import CANDIDATE_QUOTAS, FIXTURES

pytestmark = pytest.mark.spark
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    # Any name lookup fails: a page that fetched anything would log a failed load.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    # Let the page's timers run out (plotly finishes some drawing after load).
    "--virtual-time-budget=10000",
]


@pytest.fixture(scope="module")
def report_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def report_file(spark: SparkSession, events_dir: Path, report_work: Path) -> Path:
    work = report_work
    rollup(spark, events_dir, work / "rollup", quota_text=CANDIDATE_QUOTAS)
    recommend(spark, work / "rollup", work / "rec.toml", RecommendOptions())
    replay(spark, events_dir, CANDIDATE_QUOTAS, work / "replay", closed_loop=True)
    ingest(spark, FIXTURES / "logs", work / "ingested")
    inputs = ReportInputs(
        work / "rollup",
        work / "replay",
        work / "rec.toml",
        work / "ingested" / "_ingest_report.json",
    )
    return report(inputs, work / "report.html")


def _explorer_data(text: str, element_id: str) -> dict[str, Any]:
    found = re.search(
        rf"<script type='application/json' id='{element_id}-data'>(.*?)</script>", text, re.S
    )
    assert found is not None, f"no data for {element_id}"
    return dict(json.loads(found[1]))


def test_report_is_self_contained(report_file: Path) -> None:
    text = report_file.read_text()
    for section in ("Top entities", "Rate against quota", "Replay", "Recommended quotas", "Ingest"):
        assert section in text
    # Nothing is fetched at view time: no external script, stylesheet, image or frame in the
    # markup (plotly.js holds link text of its own; the Chromium test runs with no network).
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", text, flags=re.S)
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", markup)
    assert "<link" not in text
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert text.count("Plotly.newPlot") >= 2  # drawn by the page itself, from inlined plotly.js


def test_every_sharing_key_is_selectable_with_readable_names(
    report_file: Path, report_work: Path
) -> None:
    data = _explorer_data(report_file.read_text(), "qg-rates")
    entities = pd.read_parquet(report_work / "rollup" / "entities")
    assert len(data["items"]) == len(entities)
    labels = [item["label"] for item in data["items"]]
    assert any("@" in label for label in labels), "the generated team users have an @"
    assert not any("%40" in label for label in labels)
    grid = data["grid"]
    for item in data["items"]:
        assert len(item["b"]) == len(item["v"]) and sum(item["b"]) < grid["n"]


def test_recorded_and_replayed_throttle_per_client(report_file: Path, report_work: Path) -> None:
    data = _explorer_data(report_file.read_text(), "qg-throttles")
    requests = pd.read_parquet(
        report_work / "replay" / "requests", columns=["throttle_ms", "predicted_throttle_ms"]
    )
    assert data["items"], "the candidate quotas throttle the generated traffic"
    for column, field in (("predicted_throttle_ms", "pred"), ("throttle_ms", "rec")):
        shown = sum(sum(v * 10 ** item["e"] for v in item[field]) for item in data["items"])
        # Three significant digits per bucket: the sums agree to well within a percent.
        assert shown == pytest.approx(float(requests[column].sum()), rel=0.01, abs=1)


def _chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    # `make test` installs it; a missing browser must fail the check, not skip it quietly.
    assert browser is not None, (
        "Debian's chromium is not installed: run `make test` or `apt-get install -y chromium`"
    )
    return browser


def _page_errors(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if "CONSOLE" in line or "Uncaught" in line or "Failed to load resource" in line
    ]


def test_report_renders_in_headless_chromium(
    report_file: Path, tmp_path: Path, test_output: Path
) -> None:
    """Plots drawn, lists filled, no console message, no network; a screenshot is kept."""
    result = subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            report_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert "quotagate usage report" in dom
    text = report_file.read_text()
    for element_id in ("qg-top-entities", "qg-rates", "qg-heatmap", "qg-throttles"):
        # plotly marks a div it has drawn in, and draws into SVG.
        assert re.search(rf'<div id="{element_id}" class="[^"]*js-plotly-plot', dom), element_id
    assert dom.count('class="main-svg"') >= 8
    for element_id in ("qg-rates", "qg-throttles"):
        options = re.search(rf'<select id="{element_id}-select">(.*?)</select>', dom, re.S)
        assert options is not None
        assert options[1].count("<option") == len(_explorer_data(text, element_id)["items"])
    assert _page_errors(result.stderr) == []

    # A link can open the report on one key and one client (the address keeps the choice).
    rates, throttles = (_explorer_data(text, e)["items"] for e in ("qg-rates", "qg-throttles"))
    key = f"{rates[2]['group']}: {rates[2]['label']}"
    client = throttles[1]["label"]
    linked = subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            report_file.as_uri() + "#" + urlencode({"qg-rates": key, "qg-throttles": client}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert linked.returncode == 0, linked.stderr[-2000:]
    titles = [html.unescape(t) for t in re.findall(r'class="gtitle"[^>]*>([^<]*)<', linked.stdout)]
    assert key in titles and client in titles
    assert _page_errors(linked.stderr) == []

    screenshot = test_output / "report.png"
    screenshot.unlink(missing_ok=True)
    shot = subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,4200",
            f"--screenshot={screenshot}",
            report_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert _page_errors(shot.stderr) == []
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 50_000  # a page of plots, not a blank one
    print(f"report screenshot: {screenshot}")  # shown with -rA: the test's output


def test_report_of_a_rollup_without_events(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    pq.write_table(USAGE_SCHEMA.empty_table(), tmp_path / "events" / "part-0.parquet")
    rollup(spark, tmp_path / "events", tmp_path / "rollup")
    html = report(ReportInputs(tmp_path / "rollup"), tmp_path / "report.html").read_text()
    assert "no events" in html
