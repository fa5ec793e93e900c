"""The entity options of ``quotagate quotas``, as ``kafka-configs`` takes them.

``--entity-type users --entity-name alice --entity-type clients --entity-default`` names one
entity of two parts: each ``--entity-type`` pairs with the ``--entity-name`` or
``--entity-default`` that follows it. The options are declared to click so that ``--help``
shows them, but click collects repeated options into separate lists and loses how they
interleave; :class:`EntityCommand` therefore keeps the raw arguments and the pairs are read
from them, in order. :func:`entity_command` declares the options and that class together, once
for every command that names entities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final

import typer
from typer.core import TyperCommand

from quotagate.commands.option_group import with_options

ENTITY_TYPES: Final = {
    "users": "user",
    "clients": "client-id",
    "ips": "ip",
    "client-id-prefix": "client-id-prefix",
    "tenant": "tenant",
}
"""kafka-configs' entity type names → KIP-546's; ``client-id-prefix`` is Redpanda's (as
``rpk``), ``tenant`` quotagate's (docs/quotas.md, "Tenants")."""
_RAW_ARGS: Final = "quotagate.raw_args"

_TYPE_HELP: Final = (
    "users, clients, ips, client-id-prefix or tenant; repeat for a combined entity, each "
    "followed by its --entity-name or --entity-default: --entity-type users --entity-name "
    "alice --entity-type clients --entity-default."
)
EntityType = Annotated[
    list[str] | None,
    typer.Option(
        "--entity-type",
        metavar="users|clients|ips|client-id-prefix|tenant",
        help=_TYPE_HELP,
        rich_help_panel="Entity (as kafka-configs)",
    ),
]
EntityName = Annotated[
    list[str] | None,
    typer.Option(
        "--entity-name",
        metavar="NAME",
        help="Name of the entity of the --entity-type before it (a user, a client id, an IP, "
        "a client id prefix, a tenant).",
        rich_help_panel="Entity (as kafka-configs)",
    ),
]
EntityDefault = Annotated[
    int,
    typer.Option(
        "--entity-default",
        count=True,
        metavar="",
        show_default=False,
        help="The default entity of the --entity-type before it (every user / client id "
        "without a quota of its own).",
        rich_help_panel="Entity (as kafka-configs)",
    ),
]


def entity_options(
    entity_type: EntityType = None,
    entity_name: EntityName = None,
    entity_default: EntityDefault = 0,
) -> None:
    """Declared so that click accepts the options and --help shows them; their values are
    not used (click's lists lose the order), :func:`entity_pairs` reads the pairs."""


def entity_command(
    app: typer.Typer, name: str | None = None, *, epilog: str | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Registers a command that takes the entity options after its own; it reads them with
    :func:`entity_pairs` from its ``ctx: typer.Context``."""

    def register(command: Callable[..., None]) -> Callable[..., None]:
        app.command(name, cls=EntityCommand, epilog=epilog)(with_options(entity_options)(command))
        return command

    return register


class EntityArgsError(ValueError):
    """The entity options do not pair up; the message says what to add or remove."""


class EntityCommand(TyperCommand):
    """A command that remembers its raw arguments, for :func:`entity_pairs`."""

    # ``ctx`` is click's Context, which typer vendors privately: Any rather than a private import.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_RAW_ARGS] = list(args)
        result: list[str] = super().parse_args(ctx, args)
        return result


def entity_pairs(ctx: typer.Context) -> list[tuple[str, str | None]]:
    """The entity of this invocation's options; a usage error (exit 2) if they do not pair."""
    try:
        return parse_entity_args(_entity_tokens(ctx.meta.get(_RAW_ARGS, [])))
    except EntityArgsError as exc:
        raise typer.BadParameter(str(exc), param_hint="--entity-type") from None


def _entity_tokens(args: list[Any]) -> list[str]:
    """Only the entity options and their values, ``--opt=value`` split, in order."""
    tokens: list[str] = []
    i = 0
    while i < len(args):
        arg = str(args[i])
        option, equals, value = arg.partition("=")
        if option in ("--entity-type", "--entity-name"):
            if equals:
                tokens += [option, value]
            else:
                tokens += args[i : i + 2]
                i += 1
        elif arg == "--entity-default":
            tokens.append(arg)
        elif arg == "--":
            break
        i += 1
    return [str(t) for t in tokens]


def parse_entity_args(args: list[str]) -> list[tuple[str, str | None]]:
    """``--entity-type T (--entity-name N | --entity-default)`` pairs, in order; a type
    alone (last) pairs with ``""``: kafka-configs' "every entity of this type"."""
    pairs: list[tuple[str, str | None]] = []
    pending: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--entity-type":
            if pending is not None:
                raise EntityArgsError(
                    f"--entity-type {_kafka_name(pending)} needs --entity-name NAME or "
                    "--entity-default before the next --entity-type"
                )
            if i + 1 >= len(args) or args[i + 1] not in ENTITY_TYPES:
                raise EntityArgsError(
                    f"--entity-type takes one of {', '.join(ENTITY_TYPES)}"
                    + (f", not {args[i + 1]!r}" if i + 1 < len(args) else "")
                )
            pending = ENTITY_TYPES[args[i + 1]]
            i += 2
        elif arg in ("--entity-name", "--entity-default"):
            if pending is None:
                raise EntityArgsError(
                    f"{arg} must follow an --entity-type, e.g. --entity-type users {arg}"
                    + (" alice" if arg == "--entity-name" else "")
                )
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
        pairs.append((pending, ""))
    types = [t for t, _ in pairs]
    if len(set(types)) != len(types):
        raise EntityArgsError("each --entity-type may appear once per entity")
    return pairs


def matches(entity: dict[str, str | None], pairs: list[tuple[str, str | None]]) -> bool:
    """Every pair given is a part of the entity; an empty name stands for any name."""
    return all(kind in entity and (name == "" or entity[kind] == name) for kind, name in pairs)


def _kafka_name(entity_type: str) -> str:
    return next(k for k, v in ENTITY_TYPES.items() if v == entity_type)
