"""``quotagate users``: manage the SCRAM credentials SASL listeners authenticate against.

Works on the store file directly (the gateway reads it on every login), so changes apply to
the next connection without a restart. Whoever can write the file administers the users.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from quotagate.commands.plugins import load_gateway_config
from quotagate.gateway import ConfigError, GatewayConfig, store_settings
from quotagate.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism
from quotagate.store.backends import StoreError, StoreSettings, open_credentials
from quotagate.store.credentials import DEFAULT_ITERATIONS, Credentials

app = typer.Typer(
    help="Manage SASL/SCRAM users (PLAIN logins use the same credentials).",
    no_args_is_help=True,
)

_STORE_OPTION = typer.Option(
    None,
    "--store",
    help="SQLite store file (default: [store] path of --config, else quotagate.db).",
)
_CONFIG_OPTION = typer.Option(
    None, "--config", exists=True, dir_okay=False, help="Gateway TOML config naming the store."
)
_MECHANISM_OPTION = typer.Option(
    None,
    "--mechanism",
    "-m",
    help="SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (default: both).",
)


def resolve_store(store: Path | None, config: Path | None) -> StoreSettings:
    """--store (a SQLite file) wins, then the ``[store]`` of the gateway config (as
    ``quotagate serve`` reads it: a file, or the upstream's config topic)."""
    if store is not None:
        return StoreSettings(path=str(store))
    if config is not None:
        try:
            return store_settings(load_gateway_config(config))
        except ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--config") from exc
    return store_settings(GatewayConfig())


def open_store_credentials(store: Path | None, config: Path | None) -> Credentials:
    try:
        return open_credentials(resolve_store(store, config), "quotagate-cli")
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _mechanisms(names: list[str] | None) -> list[ScramMechanism]:
    if not names:
        return list(ScramMechanism)
    chosen = []
    for name in names:
        try:
            chosen.append(ScramMechanism.from_name(name.upper()))
        except ValueError:
            valid = ", ".join(m.value for m in ScramMechanism)
            raise typer.BadParameter(
                f"{name!r} (choose from {valid})", param_hint="--mechanism"
            ) from None
    return chosen


def _read_stdin_password() -> str:
    line = sys.stdin.readline()
    # Only the line terminator goes: spaces may be part of the password.
    return line.removesuffix("\n").removesuffix("\r")


@app.command("add")
def add(
    username: str = typer.Argument(..., help="The user; clients authenticate as User:<name>."),
    *,
    password_stdin: bool = typer.Option(
        False, "--password-stdin", help="Read the password from the first line of stdin."
    ),
    mechanism: list[str] | None = _MECHANISM_OPTION,
    iterations: int = typer.Option(
        DEFAULT_ITERATIONS,
        "--iterations",
        min=MIN_ITERATIONS,
        max=MAX_ITERATIONS,
        help="PBKDF2 iterations (Kafka accepts 4096 to 16384).",
    ),
    store: Path | None = _STORE_OPTION,
    config: Path | None = _CONFIG_OPTION,
) -> None:
    """Create a user or replace their password."""
    mechanisms = _mechanisms(mechanism)
    if password_stdin:
        password = _read_stdin_password()
    else:
        password = typer.prompt(
            f"Password for {username}", hide_input=True, confirmation_prompt=True
        )
    if not password:
        raise typer.BadParameter("the password must not be empty", param_hint="password")
    where = resolve_store(store, config).describe()
    credentials = open_store_credentials(store, config)
    try:
        credentials.set_password(username, password, mechanisms, iterations)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    finally:
        credentials.close()
    names = ", ".join(m.value for m in mechanisms)
    typer.echo(f"User:{username} stored for {names} ({iterations} iterations) in {where}")


@app.command("remove")
def remove(
    username: str = typer.Argument(...),
    mechanism: list[str] | None = _MECHANISM_OPTION,
    store: Path | None = _STORE_OPTION,
    config: Path | None = _CONFIG_OPTION,
) -> None:
    """Delete a user's credentials (all mechanisms unless --mechanism is given)."""
    mechanisms = _mechanisms(mechanism) if mechanism else None
    where = resolve_store(store, config).describe()
    credentials = open_store_credentials(store, config)
    try:
        removed = credentials.remove(username, mechanisms)
    finally:
        credentials.close()
    if removed == 0:
        typer.echo(f"no credentials for User:{username} in {where}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"removed {removed} credential(s) of User:{username}")


@app.command("list")
def list_users(
    store: Path | None = _STORE_OPTION,
    config: Path | None = _CONFIG_OPTION,
) -> None:
    """List users with their mechanisms and iteration counts (never any key material)."""
    credentials = open_store_credentials(store, config)
    try:
        entries = credentials.users()
    finally:
        credentials.close()
    for entry in entries:
        mechs = " ".join(f"{m.value}:{n}" for m, n in entry.iterations.items())
        typer.echo(f"{entry.username}\t{mechs}")
