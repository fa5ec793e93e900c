"""The HTML report: self-contained, and it renders in headless Chromium without errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.ingest import ingest
from quotagate.pipeline.recommend import RecommendOptions, recommend
from quotagate.pipeline.replay import replay
from quotagate.pipeline.report import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.usage.schema import USAGE_SCHEMA

from .conftest import CANDIDATE_QUOTAS, FIXTURES

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
]


@pytest.fixture(scope="module")
def report_file(
    spark: SparkSession, events_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    work = tmp_path_factory.mktemp("report")
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


def test_report_is_self_contained(report_file: Path) -> None:
    text = report_file.read_text()
    for section in ("Top entities", "Rate against quota", "Replay", "Recommended quotas", "Ingest"):
        assert section in text
    assert text.count("<svg") >= 3
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", text)
    assert "<script" not in text and "<link" not in text


def test_report_renders_in_headless_chromium(report_file: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    # `make test` installs it; a missing browser must fail the check, not skip it quietly.
    assert browser is not None, (
        "Debian's chromium is not installed: run `make test` or `apt-get install -y chromium`"
    )
    result = subprocess.run(
        [
            browser,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path}",
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
    assert dom.count("<svg") >= 3
    page_errors = [
        line
        for line in result.stderr.splitlines()
        if "CONSOLE" in line or "Uncaught" in line or "Failed to load resource" in line
    ]
    assert page_errors == []


def test_report_of_a_rollup_without_events(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    pq.write_table(USAGE_SCHEMA.empty_table(), tmp_path / "events" / "part-0.parquet")
    rollup(spark, tmp_path / "events", tmp_path / "rollup")
    html = report(ReportInputs(tmp_path / "rollup"), tmp_path / "report.html").read_text()
    assert "no events" in html
