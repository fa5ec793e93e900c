"""``quotagate quotas``: client quotas of a running gateway, shaped like ``kafka-configs``.

Talks Kafka's own admin protocol (DescribeClientQuotas / AlterClientQuotas, KIP-546) to the
gateway through :class:`quotagate.client.SyncAdminClient`, so it works against any gateway
(or Kafka broker) the caller can reach. Entities are given as ``kafka-configs`` does, in
order: ``--entity-type users --entity-name alice --entity-type clients --entity-default``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotagate.client.config import AdminConfig
from quotagate.client.errors import KafkaError
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.sync import SyncAdminClient
from quotagate.commands.command_config import CommandConfig, admin_config
from quotagate.quota import ClientQuotaFilter, FilterComponent
from quotagate.quota.quota_file import QuotaFileError, load_quota_file

app = typer.Typer(
    help="Describe and alter client quotas of a running gateway (like kafka-configs).",
    no_args_is_help=True,
)

_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}

Bootstrap = Annotated[
    str,
    typer.Option("--bootstrap-server", "-b", help="HOST:PORT of the gateway (any listener)."),
]


class EntityArgsError(ValueError):
    pass


def parse_entity_args(args: list[str]) -> list[tuple[str, str | None]]:
    """``--entity-type T (--entity-name N | --entity-default)`` pairs, in order."""
    pairs: list[tuple[str, str | None]] = []
    pending: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--entity-type":
            if pending is not None:
                raise EntityArgsError(
                    f"--entity-type {pending} needs --entity-name or --entity-default"
                )
            if i + 1 >= len(args) or args[i + 1] not in _ENTITY_TYPES:
                raise EntityArgsError(f"--entity-type takes one of {', '.join(_ENTITY_TYPES)}")
            pending = _ENTITY_TYPES[args[i + 1]]
            i += 2
        elif arg in ("--entity-name", "--entity-default"):
            if pending is None:
                raise EntityArgsError(f"{arg} must follow an --entity-type")
            if arg == "--entity-default":
                pairs.append((pending, None))
                i += 1
            else:
                if i + 1 >= len(args):
                    raise EntityArgsError("--entity-name takes a name")
                pairs.append((pending, args[i + 1]))
                i += 2
            pending = None
        else:
            raise EntityArgsError(f"unexpected argument {arg!r}")
    if pending is not None:
        # kafka-configs: a type without a name describes every entity of that type.
        pairs.append((pending, ""))
    return pairs


def parse_add_config(text: str) -> dict[str, float]:
    """``k=v,k2=v2`` (kafka-configs' --add-config) into numbers."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise typer.BadParameter(f"{part!r} is not key=value", param_hint="--add-config")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(
                f"{key}={value}: not a number", param_hint="--add-config"
            ) from None
    return values


def _entities(ctx: typer.Context) -> list[tuple[str, str | None]]:
    try:
        return parse_entity_args(list(ctx.args))
    except EntityArgsError as exc:
        raise typer.BadParameter(str(exc)) from None


def _print_values(values: dict[ClientQuotaEntity, dict[str, float]]) -> None:
    if not values:
        typer.echo("No quotas match.")
    for entity, configs in sorted(values.items(), key=lambda item: str(item[0])):
        rendered = ", ".join(f"{k}={_number(v)}" for k, v in sorted(configs.items()))
        typer.echo(f"Quota configs for {entity} are {rendered}")


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


@app.command(context_settings=_EXTRA)
def describe(
    ctx: typer.Context, bootstrap_server: Bootstrap, command_config: CommandConfig = None
) -> None:
    """Show quotas; with entities, only those (a type alone matches every entity of it)."""
    components = []
    for entity_type, name in _entities(ctx):
        if name is None:
            components.append(FilterComponent.of_default_entity(entity_type))
        elif name == "":
            components.append(FilterComponent.of_entity_type(entity_type))
        else:
            components.append(FilterComponent.of_entity(entity_type, name))
    quota_filter = ClientQuotaFilter.contains(components)
    try:
        with SyncAdminClient(admin_config(bootstrap_server, command_config)) as admin:
            _print_values(admin.describe_client_quotas(quota_filter))
    except KafkaError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command(context_settings=_EXTRA)
def alter(
    ctx: typer.Context,
    bootstrap_server: Bootstrap,
    add_config: Annotated[
        str | None, typer.Option("--add-config", help="k=v,k2=v2 to set.")
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="Key to remove (repeatable).")
    ] = None,
    command_config: CommandConfig = None,
) -> None:
    """Set or remove quota values of one entity."""
    pairs = _entities(ctx)
    if not pairs or any(name == "" for _, name in pairs):
        raise typer.BadParameter("alter needs --entity-name or --entity-default for each type")
    ops: dict[str, float | None] = dict(parse_add_config(add_config or ""))
    for entry in delete_config or []:
        for key in filter(None, (k.strip() for k in entry.split(","))):
            ops[key] = None
    if not ops:
        raise typer.BadParameter("give --add-config and/or --delete-config")
    alteration = ClientQuotaAlteration.of(dict(pairs), ops)
    _alter(admin_config(bootstrap_server, command_config), [alteration])


@app.command()
def apply(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Quota file (TOML).")],
    bootstrap_server: Bootstrap,
    command_config: CommandConfig = None,
) -> None:
    """Set every quota of a quota file (what ``pipeline recommend`` writes)."""
    try:
        quota_file = load_quota_file(file.read_text(encoding="utf-8"))
    except QuotaFileError as exc:
        typer.echo(f"error: {file}: {exc}", err=True)
        raise typer.Exit(2) from None
    alterations = [
        ClientQuotaAlteration.of(entry.entity, dict(entry.config)) for entry in quota_file.entries
    ]
    _alter(admin_config(bootstrap_server, command_config), alterations)


def _alter(config: AdminConfig, alterations: list[ClientQuotaAlteration]) -> None:
    failed = False
    with SyncAdminClient(config) as admin:
        result = admin.alter_client_quotas(alterations)
    for entity, error in result.items():
        if error is None:
            typer.echo(f"Completed updating config for {entity}.")
        else:
            failed = True
            typer.echo(f"error: {entity}: {error}", err=True)
    if failed:
        raise typer.Exit(1)
