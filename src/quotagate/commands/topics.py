"""``quotagate topics create|delete|add-partitions``: kafka-topics.sh's mutations, through the
quotagate admin client.

Like ``kafka-topics.sh`` the commands do not retry topics refused by a controller-mutation
quota unless ``--retry-on-quota-violation`` is given (spec §5.6); a refusal is reported with
its error code name, message and throttle time, and the exit code is non-zero.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from quotagate.client import (
    AdminResult,
    KafkaError,
    NewTopic,
    SyncAdminClient,
    ThrottlingQuotaExceededError,
)
from quotagate.client.config import AdminConfig
from quotagate.commands.command_config import COMMAND_CONFIG_HELP, admin_config

app = typer.Typer(
    help="Create and delete topics and add partitions (KIP-599 aware).", no_args_is_help=True
)

_BOOTSTRAP = typer.Option(
    ..., "--bootstrap-server", "-b", metavar="HOST:PORT", help="Broker or gateway to connect to."
)
_COMMAND_CONFIG = typer.Option(None, "--command-config", dir_okay=False, help=COMMAND_CONFIG_HELP)
_RETRY = typer.Option(
    False,
    "--retry-on-quota-violation/--no-retry-on-quota-violation",
    help="Retry topics refused by a controller-mutation quota until the timeout "
    "(off by default, as in kafka-topics.sh).",
)
_TIMEOUT = typer.Option(
    None, "--timeout-ms", min=0, help="Time allowed for the whole operation (default 60000)."
)
_CONFIGS = typer.Option(
    None, "--config", metavar="KEY=VALUE", help="Topic config; repeat for several."
)
_TOPICS = typer.Argument(..., metavar="TOPIC...", help="Topic names.")


def describe_error(error: KafkaError) -> str:
    """``NAME (code): message``, plus the throttle time for quota violations."""
    text = f"{error.name} ({error.code}): {error.message}"
    if isinstance(error, ThrottlingQuotaExceededError):
        text += f" (throttle time {error.throttle_time_ms} ms)"
    return text


def _report(result: AdminResult[str], done: str, failed: str) -> None:
    """One line per topic; exit 1 if any topic failed."""
    for topic, error in result.items():
        if error is None:
            typer.echo(f"{done} topic {topic}.")
        else:
            typer.echo(f"Error while {failed} topic {topic}: {describe_error(error)}", err=True)
    if result.errors:
        raise typer.Exit(1)


def _run(
    config: AdminConfig, operation: Callable[[SyncAdminClient], AdminResult[str]]
) -> AdminResult[str]:
    try:
        with SyncAdminClient(config) as admin:
            return operation(admin)
    except KafkaError as exc:
        typer.echo(f"Error: {describe_error(exc)}", err=True)
        raise typer.Exit(1) from exc


def _parse_configs(pairs: list[str] | None) -> dict[str, str | None]:
    configs: dict[str, str | None] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--config")
        configs[key] = value
    return configs


@app.command("create")
def create(
    topics: list[str] = _TOPICS,
    *,
    bootstrap_server: str = _BOOTSTRAP,
    command_config: Path | None = _COMMAND_CONFIG,
    partitions: int = typer.Option(
        -1, "--partitions", help="Partitions per topic (default: the broker's num.partitions)."
    ),
    replication_factor: int = typer.Option(
        -1, "--replication-factor", help="Replicas per partition (default: the broker's)."
    ),
    config: list[str] | None = _CONFIGS,
    validate_only: bool = typer.Option(
        False, "--validate-only", help="Only check that the topics could be created."
    ),
    retry_on_quota_violation: bool = _RETRY,
    timeout_ms: int | None = _TIMEOUT,
) -> None:
    """Create topics."""
    if partitions == 0 or partitions < -1:
        raise typer.BadParameter("must be >= 1", param_hint="--partitions")
    if replication_factor == 0 or replication_factor < -1:
        raise typer.BadParameter("must be >= 1", param_hint="--replication-factor")
    configs = _parse_configs(config)
    new_topics = [NewTopic(name, partitions, replication_factor, configs) for name in topics]
    result = _run(
        admin_config(bootstrap_server, command_config),
        lambda admin: admin.create_topics(
            new_topics,
            timeout_ms=timeout_ms,
            validate_only=validate_only,
            retry_on_quota_violation=retry_on_quota_violation,
        ),
    )
    _report(result, "Validated" if validate_only else "Created", "creating")


@app.command("delete")
def delete(
    topics: list[str] = _TOPICS,
    *,
    bootstrap_server: str = _BOOTSTRAP,
    command_config: Path | None = _COMMAND_CONFIG,
    retry_on_quota_violation: bool = _RETRY,
    timeout_ms: int | None = _TIMEOUT,
) -> None:
    """Delete topics."""
    result = _run(
        admin_config(bootstrap_server, command_config),
        lambda admin: admin.delete_topics(
            topics, timeout_ms=timeout_ms, retry_on_quota_violation=retry_on_quota_violation
        ),
    )
    _report(result, "Deleted", "deleting")


@app.command("add-partitions")
def add_partitions(
    topics: list[str] = _TOPICS,
    *,
    bootstrap_server: str = _BOOTSTRAP,
    command_config: Path | None = _COMMAND_CONFIG,
    partitions: int = typer.Option(
        ..., "--partitions", min=1, help="The new total number of partitions of each topic."
    ),
    validate_only: bool = typer.Option(
        False, "--validate-only", help="Only check that the partitions could be added."
    ),
    retry_on_quota_violation: bool = _RETRY,
    timeout_ms: int | None = _TIMEOUT,
) -> None:
    """Grow topics to a new total number of partitions."""
    result = _run(
        admin_config(bootstrap_server, command_config),
        lambda admin: admin.create_partitions(
            dict.fromkeys(topics, partitions),
            timeout_ms=timeout_ms,
            validate_only=validate_only,
            retry_on_quota_violation=retry_on_quota_violation,
        ),
    )
    _report(
        result, "Added partitions to" if not validate_only else "Validated", "adding partitions to"
    )
