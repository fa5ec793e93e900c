"""``quotagate users add|remove|list`` against a real store file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from quotagate.commands.users import app
from quotagate.security.scram import ScramMechanism
from quotagate.store.credentials import CredentialStore

runner = CliRunner()


def test_add_from_stdin_then_list_and_remove(tmp_path: Path) -> None:
    db = tmp_path / "users.db"
    result = runner.invoke(
        app, ["add", "alice", "--password-stdin", "--store", str(db)], input="pa ss\n"
    )
    assert result.exit_code == 0, result.output
    assert "User:alice" in result.output

    store = CredentialStore.open(db)
    assert store.verify_password("alice", "pa ss")  # inner space kept, newline dropped
    assert {u.username: u.iterations for u in store.users()} == {
        "alice": {ScramMechanism.SCRAM_SHA_256: 8192, ScramMechanism.SCRAM_SHA_512: 8192}
    }
    store.close()

    listed = runner.invoke(app, ["list", "--store", str(db)])
    assert listed.exit_code == 0
    assert listed.output == "alice\tSCRAM-SHA-256:8192 SCRAM-SHA-512:8192\n"

    removed = runner.invoke(app, ["remove", "alice", "--store", str(db)])
    assert removed.exit_code == 0
    assert runner.invoke(app, ["list", "--store", str(db)]).output == ""
    again = runner.invoke(app, ["remove", "alice", "--store", str(db)])
    assert again.exit_code == 1


def test_prompted_password_with_one_mechanism_and_iterations(tmp_path: Path) -> None:
    db = tmp_path / "users.db"
    result = runner.invoke(
        app,
        ["add", "bob", "-m", "scram-sha-512", "--iterations", "4096", "--store", str(db)],
        input="hunter22\nhunter22\n",
    )
    assert result.exit_code == 0, result.output
    assert "hunter22" not in result.output
    store = CredentialStore.open(db)
    assert [(u.username, u.iterations) for u in store.users()] == [
        ("bob", {ScramMechanism.SCRAM_SHA_512: 4096})
    ]
    assert store.verify_password("bob", "hunter22")


def test_remove_a_single_mechanism(tmp_path: Path) -> None:
    db = tmp_path / "users.db"
    runner.invoke(app, ["add", "carol", "--password-stdin", "--store", str(db)], input="pw\n")
    result = runner.invoke(app, ["remove", "carol", "-m", "SCRAM-SHA-256", "--store", str(db)])
    assert result.exit_code == 0
    assert runner.invoke(app, ["list", "--store", str(db)]).output == "carol\tSCRAM-SHA-512:8192\n"


def test_refusals(tmp_path: Path) -> None:
    db = tmp_path / "users.db"
    for args, stdin in [
        (["add", "dave", "--password-stdin", "--iterations", "1000"], "pw\n"),
        (["add", "dave", "--password-stdin", "-m", "SCRAM-SHA-1"], "pw\n"),
        (["add", "dave", "--password-stdin"], "\n"),
        (["add", "", "--password-stdin"], "pw\n"),
    ]:
        result = runner.invoke(app, [*args, "--store", str(db)], input=stdin)
        assert result.exit_code == 2, (args, result.output)
    assert runner.invoke(app, ["list", "--store", str(db)]).output == ""


def test_store_path_comes_from_the_gateway_config(tmp_path: Path) -> None:
    config = tmp_path / "quotagate.toml"
    db = tmp_path / "state" / "gw.db"
    config.write_text(f"[store]\npath = {str(db)!r}\n")
    result = runner.invoke(
        app, ["add", "erin", "--password-stdin", "--config", str(config)], input="pw\n"
    )
    assert result.exit_code == 0, result.output
    assert db.exists()
    listed = runner.invoke(app, ["list", "--config", str(config)])
    assert listed.output.startswith("erin\t")


def test_an_invalid_gateway_config_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "quotagate.toml"
    config.write_text("[store]\npaht = 'x.db'\n")
    result = runner.invoke(app, ["list", "--config", str(config)])
    assert result.exit_code == 2
    assert "paht" in result.output
