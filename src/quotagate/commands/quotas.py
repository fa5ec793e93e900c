"""``quotagate quotas``: client quotas of a running gateway, shaped like ``kafka-configs``.

Talks Kafka's own admin protocol (DescribeClientQuotas / AlterClientQuotas, KIP-546) to the
gateway through :class:`quotagate.client.SyncAdminClient`, so it works against any gateway
(or Kafka broker) the caller can reach. Entities are given as ``kafka-configs`` does, in
order: ``--entity-type users --entity-name alice --entity-type clients --entity-default``
(commands/entity_options.py). Exit codes: commands/exit_codes.py.
"""

from __future__ import annotations

import dataclasses
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Final

import typer

from quotagate.client.config import AdminConfig
from quotagate.client.errors import AuthenticationError, KafkaError
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.sync import SyncAdminClient
from quotagate.commands import exit_codes
from quotagate.commands.command_config import CommandConfig, admin_config
from quotagate.commands.entity_options import entity_command, entity_pairs, matches
from quotagate.commands.quota_history import history
from quotagate.commands.quota_plan import EntityPlan, plan, summary
from quotagate.quota import ClientQuotaFilter, FilterComponent
from quotagate.quota.principal_list import (
    EXEMPT_PRINCIPALS,
    parse_principal_list,
    principal_list_text,
)
from quotagate.quota.quota_file import (
    TENANT_MAPPING_RULES,
    QuotaFile,
    QuotaFileError,
    load_quota_file,
)
from quotagate.quota.shadow_keys import is_shadow_key, live_key, shadow_key
from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper

app = typer.Typer(
    help="Describe and alter client quotas of a running gateway (like kafka-configs). "
    + exit_codes.HELP,
    no_args_is_help=True,
)

Bootstrap = Annotated[
    str,
    typer.Option("--bootstrap-server", "-b", help="HOST:PORT of the gateway (any listener)."),
]


class Output(StrEnum):
    text = "text"
    json = "json"


TimeoutMs = Annotated[
    int | None,
    typer.Option(
        "--timeout-ms",
        min=1,
        help="Time allowed for each call to the gateway, retries included (default 60000); "
        "past it the command exits 4.",
    ),
]
OutputOption = Annotated[
    Output, typer.Option("--output", "-o", help="text (as kafka-configs prints) or json.")
]
_EPILOG: Final = exit_codes.HELP


def parse_add_config(text: str) -> dict[str, float]:
    """``k=v,k2=v2`` (kafka-configs' --add-config) into numbers."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise typer.BadParameter(
                f"{part!r} is not key=value: write e.g. producer_byte_rate=1048576",
                param_hint="--add-config",
            )
        try:
            values[key.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(
                f"{key}={value}: not a number (bytes/s or a percentage, e.g. {key}=1048576)",
                param_hint="--add-config",
            ) from None
    return values


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _entity_json(entity: ClientQuotaEntity) -> list[dict[str, str | None]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.entries]


def _print_values(values: dict[ClientQuotaEntity, dict[str, float]], output: Output) -> None:
    ordered = sorted(values.items(), key=lambda item: str(item[0]))
    if output is Output.json:
        rows = [{"entity": _entity_json(e), "values": dict(sorted(v.items()))} for e, v in ordered]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not values:
        typer.echo("No quotas match.")
    for entity, configs in ordered:
        rendered = ", ".join(f"{k}={_number(v)}" for k, v in sorted(configs.items()))
        typer.echo(f"Quota configs for {entity} are {rendered}")


def _config(bootstrap: str, command_config: Path | None, timeout_ms: int | None) -> AdminConfig:
    config = admin_config(bootstrap, command_config)
    if timeout_ms is None:
        return config
    return dataclasses.replace(config, default_api_timeout_ms=timeout_ms)


def _describe_all(admin: SyncAdminClient) -> dict[ClientQuotaEntity, dict[str, float]]:
    return admin.describe_client_quotas(ClientQuotaFilter.contains([]))


def _fail(error: KafkaError) -> typer.Exit:
    typer.echo(f"error: {error}", err=True)
    exit_ = exit_codes.exit_for(error)
    if exit_.exit_code == exit_codes.UNREACHABLE:
        typer.echo(
            "hint: check --bootstrap-server (a listener of the gateway), --command-config "
            "(security.protocol and credentials as that listener wants them) and --timeout-ms",
            err=True,
        )
    elif isinstance(error, AuthenticationError):
        typer.echo(
            "hint: the gateway refused the login: check the username, password and "
            "sasl.mechanism in --command-config",
            err=True,
        )
    return exit_


@entity_command(app, epilog=_EPILOG)
def describe(
    ctx: typer.Context,
    bootstrap_server: Bootstrap,
    output: OutputOption = Output.text,
    command_config: CommandConfig = None,
    timeout_ms: TimeoutMs = None,
) -> None:
    """Show quotas; with entities, only those (a type alone matches every entity of it)."""
    components = []
    for kind, name in entity_pairs(ctx):
        if name is None:
            components.append(FilterComponent.of_default_entity(kind))
        elif name == "":
            components.append(FilterComponent.of_entity_type(kind))
        else:
            components.append(FilterComponent.of_entity(kind, name))
    quota_filter = ClientQuotaFilter.contains(components)
    try:
        with SyncAdminClient(_config(bootstrap_server, command_config, timeout_ms)) as admin:
            values = admin.describe_client_quotas(quota_filter)
    except KafkaError as exc:
        raise _fail(exc) from None
    _print_values(values, output)


@entity_command(app, epilog=_EPILOG)
def alter(
    ctx: typer.Context,
    bootstrap_server: Bootstrap,
    add_config: Annotated[
        str | None,
        typer.Option("--add-config", help="k=v,k2=v2 to set, e.g. producer_byte_rate=1048576."),
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="Key to remove (repeatable).")
    ] = None,
    validate_only: Annotated[
        bool,
        typer.Option("--dry-run", help="Have the gateway validate only (validate_only)."),
    ] = False,
    shadow: Annotated[
        bool,
        typer.Option(
            "--shadow",
            help="Set or remove the entity's shadow quotas: evaluated on live traffic and "
            "enforced on nobody, until `quotas promote` makes them live.",
        ),
    ] = False,
    command_config: CommandConfig = None,
    timeout_ms: TimeoutMs = None,
) -> None:
    """Set or remove quota values of one entity (with --shadow, its shadow values)."""
    pairs = _one_entity(ctx)
    ops: dict[str, float | None] = dict(parse_add_config(add_config or ""))
    for entry in delete_config or []:
        for key in filter(None, (k.strip() for k in entry.split(","))):
            ops[key] = None
    if not ops:
        raise typer.BadParameter(
            "give --add-config KEY=VALUE and/or --delete-config KEY", param_hint="--add-config"
        )
    if shadow:
        # The shadow flag travels in the key (quota/shadow_keys.py): shadow.<key>.
        ops = {key if is_shadow_key(key) else shadow_key(key): v for key, v in ops.items()}
    alteration = ClientQuotaAlteration.of(dict(pairs), ops)
    _alter(_config(bootstrap_server, command_config, timeout_ms), [alteration], validate_only)


@entity_command(app, epilog=_EPILOG)
def promote(
    ctx: typer.Context,
    bootstrap_server: Bootstrap,
    command_config: CommandConfig = None,
    timeout_ms: TimeoutMs = None,
) -> None:
    """Make one entity's shadow quotas live, and remove them from the shadow set.

    One AlterClientQuotas request sets each ``<key>`` to its ``shadow.<key>`` value and removes
    the shadow value, so the store applies both in one transaction."""
    pairs = _one_entity(ctx)
    entity = ClientQuotaEntity.of(dict(pairs))
    config = _config(bootstrap_server, command_config, timeout_ms)
    try:
        with SyncAdminClient(config) as admin:
            live = _describe_all(admin)
    except KafkaError as exc:
        raise _fail(exc) from None
    shadows = {k: v for k, v in live.get(entity, {}).items() if is_shadow_key(k)}
    if not shadows:
        typer.echo(
            f"error: {entity} has no shadow quotas to promote; set some with "
            "`quotagate quotas alter --shadow ... --add-config KEY=VALUE`",
            err=True,
        )
        raise typer.Exit(exit_codes.USAGE)
    ops: dict[str, float | None] = {}
    for key, value in sorted(shadows.items()):
        ops[live_key(key)] = value
        ops[key] = None
        typer.echo(f"{entity}: {live_key(key)} -> {_number(value)}")
    _alter(config, [ClientQuotaAlteration.of(entity.as_dict(), ops)])


def _one_entity(ctx: typer.Context) -> list[tuple[str, str | None]]:
    pairs = entity_pairs(ctx)
    if not pairs or any(name == "" for _, name in pairs):
        raise typer.BadParameter(
            "name the entity: --entity-type users --entity-name alice (or --entity-default), "
            "and the same for each further --entity-type",
            param_hint="--entity-type",
        )
    return pairs


@entity_command(app, epilog=_EPILOG)
def apply(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Quota file (TOML).")],
    bootstrap_server: Bootstrap,
    show_plan: Annotated[
        bool,
        typer.Option(
            "--plan", help="Print what would change per entity (old -> new); change nothing."
        ),
    ] = False,
    prune: Annotated[
        bool, typer.Option("--prune", help="Also remove live quotas the file does not name.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Send the changes with validate_only: the gateway checks them, applies none.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Exit 2 when the live quotas differ from the file (with --prune: extra live "
            "quotas count too), printing the differences; change nothing. For CI.",
        ),
    ] = False,
    output: OutputOption = Output.text,
    command_config: CommandConfig = None,
    timeout_ms: TimeoutMs = None,
) -> None:
    """Make the gateway's quotas what a quota file says (what ``pipeline recommend`` writes).

    Only the differences are sent; --plan, --check and --dry-run change nothing. With entity
    options, only the entities they match (a type alone: every entity of it) are compared,
    applied and pruned. The file's [broker] settings (tenant.mapping.rules,
    quota.exempt.principals) are set on the default broker resource with
    IncrementalAlterConfigs, as kafka-configs --entity-type brokers --entity-default does
    (not with entity options); --check compares them with what the gateway describes.
    """
    scope = entity_pairs(ctx)
    if show_plan + dry_run + check > 1:
        raise typer.BadParameter("give at most one of --plan, --check, --dry-run")
    try:
        quota_file = load_quota_file(file.read_text(encoding="utf-8"))
    except QuotaFileError as exc:
        raise typer.BadParameter(f"{file}: {exc}", param_hint="FILE") from None
    broker = {} if scope else _broker_settings(file, quota_file)
    wanted: dict[ClientQuotaEntity, dict[str, float]] = {}
    for entry in quota_file.entries:
        wanted.setdefault(ClientQuotaEntity.of(entry.entity), {}).update(entry.config)
    config = _config(bootstrap_server, command_config, timeout_ms)
    try:
        with SyncAdminClient(config) as admin:
            live = _live_only(_describe_all(admin))
            if check and broker:
                broker = _broker_differences(admin, broker)
    except KafkaError as exc:
        raise _fail(exc) from None
    plans = plan(_within(live, scope), _within(wanted, scope), prune=prune)
    if show_plan or check:
        _print_plan(plans, output)
        for name, value in broker.items():
            typer.echo(f"broker default: {name} = {value!r}", err=check)
        if check and (plans or broker):
            raise typer.Exit(exit_codes.USAGE)
        return
    if broker:
        _alter_broker(config, broker, dry_run)
    if not plans:
        typer.echo("No changes: the gateway's quotas are what the file says.")
        return
    _alter(config, [p.alteration() for p in plans], dry_run)


def _broker_settings(file: Path, quota_file: QuotaFile) -> dict[str, str]:
    """The file's [broker] settings as IncrementalAlterConfigs values, checked by the
    gateway's own rules first, so that a bad file sends nothing."""
    settings: dict[str, str] = {}
    if quota_file.tenant_mapping_rules is not None:
        try:
            TenantMapper.from_rules(quota_file.tenant_mapping_rules)
        except InvalidRuleError as exc:
            raise typer.BadParameter(f"{file}: [broker] {exc}", param_hint="FILE") from None
        settings[TENANT_MAPPING_RULES] = quota_file.tenant_mapping_rules
    if quota_file.exempt_principals is not None:
        settings[EXEMPT_PRINCIPALS] = principal_list_text(quota_file.exempt_principals)
    return settings


def _broker_differences(admin: SyncAdminClient, wanted: dict[str, str]) -> dict[str, str]:
    """The file's [broker] settings the default broker resource does not hold as written."""
    live = admin.describe_broker_defaults(list(wanted))
    if isinstance(live, KafkaError):
        raise live
    return {name: value for name, value in wanted.items() if _normalised(name, live.get(name))
            != _normalised(name, value)}  # fmt: skip


def _normalised(name: str, value: str | None) -> str | None:
    # A list's order and blanks are not part of its value.
    if value is None or name != EXEMPT_PRINCIPALS:
        return value
    return principal_list_text(sorted(parse_principal_list(value)))


def _alter_broker(config: AdminConfig, settings: dict[str, str], validate_only: bool) -> None:
    try:
        with SyncAdminClient(config) as admin:
            error = admin.alter_broker_defaults(settings, validate_only=validate_only)
    except KafkaError as exc:
        raise _fail(exc) from None
    if error is not None:
        typer.echo(f"error: broker default {', '.join(settings)}: {error}", err=True)
        raise typer.Exit(exit_codes.REFUSED)
    done = "Validated (nothing changed)" if validate_only else "Completed updating config"
    typer.echo(f"{done} for broker default: {', '.join(settings)}.")


def _live_only(
    values: dict[ClientQuotaEntity, dict[str, float]],
) -> dict[ClientQuotaEntity, dict[str, float]]:
    """Without the shadow values: a quota file states live quotas, and --prune must not
    remove a candidate being watched (`quotas promote` or `alter --shadow` change those)."""
    live = {e: {k: v for k, v in vs.items() if not is_shadow_key(k)} for e, vs in values.items()}
    return {e: vs for e, vs in live.items() if vs}


def _within(
    values: dict[ClientQuotaEntity, dict[str, float]], scope: list[tuple[str, str | None]]
) -> dict[ClientQuotaEntity, dict[str, float]]:
    return {e: v for e, v in values.items() if matches(e.as_dict(), scope)}


def _print_plan(plans: list[EntityPlan], output: Output) -> None:
    if output is Output.json:
        typer.echo(json.dumps([p.as_json() for p in plans], indent=2))
        return
    for entity_plan in plans:
        typer.echo(entity_plan.render())
    typer.echo(summary(plans))


def _alter(
    config: AdminConfig, alterations: list[ClientQuotaAlteration], validate_only: bool = False
) -> None:
    failed = False
    try:
        with SyncAdminClient(config) as admin:
            result = admin.alter_client_quotas(alterations, validate_only=validate_only)
    except KafkaError as exc:
        raise _fail(exc) from None
    done = "Validated (nothing changed)" if validate_only else "Completed updating config"
    for entity, error in result.items():
        if error is None:
            typer.echo(f"{done} for {entity}.")
        else:
            failed = True
            typer.echo(f"error: {entity}: {error}", err=True)
    if failed:
        raise typer.Exit(exit_codes.REFUSED)


# Registered last so that --help lists it after describe, alter and apply.
entity_command(app, "history", epilog=exit_codes.HELP)(history)
