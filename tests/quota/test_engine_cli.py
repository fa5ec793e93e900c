"""`quotagate --version` and `quotagate engine`: the engine answering from the command line."""

from __future__ import annotations

from typer.testing import CliRunner

from quotagate import __version__
from quotagate.cli import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"quotagate {__version__}"


def test_help_lists_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "engine" in result.output


def test_engine_throttle_matches_the_kafka_vector() -> None:
    records = ",".join(f"{s * 1000}:400" for s in range(10)) + ",10500:2300"
    result = runner.invoke(app, ["engine", "throttle", "--quota", "500", "--records", records])
    assert result.exit_code == 0, result.output
    assert "2100" in result.output.splitlines()[-2]


def test_engine_throttle_explains_bad_input() -> None:
    result = runner.invoke(app, ["engine", "throttle", "--quota", "5", "--records", "oops"])
    assert result.exit_code == 2
    assert "OFFSET_MS:VALUE" in result.output


def test_engine_backoff_is_repeatable_with_a_seed() -> None:
    args = ["engine", "backoff", "--seed", "3", "--attempts", "6"]
    first, second = runner.invoke(app, args), runner.invoke(app, args)
    assert first.exit_code == 0 and first.output == second.output
