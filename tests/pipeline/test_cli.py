"""The ``quotagate pipeline`` commands: fast help, readable errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotagate.cli import app


def test_help_does_not_import_spark_or_pandas() -> None:
    code = (
        "import sys, quotagate.cli; "
        "heavy = [m for m in ('pyspark', 'pandas', 'plotly') if m in sys.modules]; "
        "sys.exit(1 if heavy else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_every_stage_is_a_command() -> None:
    result = CliRunner().invoke(app, ["pipeline", "--help"])
    assert result.exit_code == 0
    for stage in ("generate", "ingest", "rollup", "replay", "recommend", "report", "all"):
        assert stage in result.output


def test_an_empty_input_directory_is_one_line_not_a_stack_trace(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["pipeline", "rollup", str(tmp_path), str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "holds no Parquet files" in result.output
    assert "Traceback" not in result.output and "java." not in result.output


def test_a_broken_quota_file_is_reported(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    quotas = tmp_path / "q.toml"
    quotas.write_text("[[quota]]\nuser = 'a'\nproducer_byte_rate = -5\n")
    result = CliRunner().invoke(
        app, ["pipeline", "replay", str(events), str(quotas), str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "error" in result.output


# The commands that roll usage up, with their arguments: each takes --quotas and --level.
ROLLING_UP = {
    "rollup": lambda tmp: [str(tmp), str(tmp / "o")],
    "stream": lambda tmp: ["127.0.0.1:9092", "usage", str(tmp / "o")],
}


@pytest.mark.parametrize("command", sorted(ROLLING_UP))
def test_an_unknown_level_is_one_line(tmp_path: Path, command: str) -> None:
    arguments = ROLLING_UP[command](tmp_path)
    result = CliRunner().invoke(app, ["pipeline", command, *arguments, "--level", "topic"])
    assert result.exit_code == 2
    assert "unknown level 'topic'" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", sorted(ROLLING_UP))
def test_a_broken_grouping_quota_file_is_one_line(tmp_path: Path, command: str) -> None:
    quotas = tmp_path / "q.toml"
    quotas.write_text("[[quota]]\nuser = 'a'\nproducer_byte_rate = -5\n")
    arguments = ROLLING_UP[command](tmp_path)
    result = CliRunner().invoke(app, ["pipeline", command, *arguments, "--quotas", str(quotas)])
    assert result.exit_code == 2
    assert "error" in result.output and str(quotas) in result.output.replace("\n", "")
    assert "Traceback" not in result.output


def test_an_impossible_time_zone_offset_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["pipeline", "ingest", str(tmp_path), str(tmp_path / "o"), "--tz-offset-h", "30"]
    )
    assert result.exit_code == 2
    assert "--tz-offset-h" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
