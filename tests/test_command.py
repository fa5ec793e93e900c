"""The ``quotagate`` command as a new user first meets it: its help and its side effects."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from quotagate.cli import app


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


# typer's click (it carries its own copy): a group has its sub-commands, a command its params.
_ROOT: Any = typer.main.get_command(app)
_ALL = sorted(_commands(_ROOT))


@pytest.mark.parametrize("path", _ALL, ids=" ".join)
def test_help_on_an_80_column_terminal_names_every_option_whole(path: tuple[str, ...]) -> None:
    command = _ROOT
    for name in path:
        command = command.commands[name]
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80, result.output
    words = set(result.output.replace(",", " ").split())
    for param in command.params:
        for option in (*param.opts, *param.secondary_opts):
            if option.startswith("-"):
                assert option in words, f"{option} is not whole in:\n{result.output}"


def test_the_command_writes_nothing_into_the_working_directory(tmp_path: Path) -> None:
    # The command as installed (the venv's script), in an empty directory: kio would import
    # hypothesis, which the test dependencies install, and that wrote ./.hypothesis.
    script = Path(sys.executable).with_name("quotagate")
    for args in (["--version"], ["topics", "create", "--help"]):
        done = subprocess.run(
            [str(script), *args], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "quotagate", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.startswith("quotagate "), done.stderr
    assert list(tmp_path.iterdir()) == []
