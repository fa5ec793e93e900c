"""``quotagate quotas history``: who changed which client quota, when, from what to what;
without an entity filter, the changes of ``tenant.mapping.rules`` and
``quota.exempt.principals`` (the default broker's text settings) too.

Read from the store, not through a gateway (docs/quotas.md, "History"): the audit names
principals and client addresses, so it is read with the store's own access (the file's
permissions, or the upstream credentials of ``[upstream]``), adds no admin API or HTTP
endpoint a client could reach, and answers while every gateway is down. ``--config`` names
the gateway config whose ``[store]`` to read (either backend), ``--store`` a SQLite file.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Annotated, Final

import typer

from quotagate.client.quotas import ClientQuotaEntity
from quotagate.commands import exit_codes
from quotagate.commands.entity_options import entity_pairs, matches
from quotagate.commands.users import resolve_store
from quotagate.store.backends import StoreError
from quotagate.store.history import client_quota_history, setting_history
from quotagate.store.quotas import AuditEntry, SettingChange, decode_entity

_RELATIVE: Final = re.compile(r"(\d+)([smhd])")
_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}

Store = Annotated[Path | None, typer.Option("--store", help="SQLite store file to read.")]
Config = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        exists=True,
        dir_okay=False,
        help="Gateway config whose [store] to read (SQLite file or the fleet's config topic).",
    ),
]
Since = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only changes at or after this: an ISO 8601 time (2026-11-25T10:00Z) or an age "
        "(90s, 30m, 12h, 7d).",
    ),
]


def parse_since(text: str, now_ms: int) -> int:
    """``--since`` as epoch milliseconds."""
    relative = _RELATIVE.fullmatch(text.strip())
    if relative:
        return now_ms - int(relative[1]) * _UNIT_S[relative[2]] * 1000
    try:
        moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither an ISO 8601 time (2026-11-25T10:00:00Z) nor an age (30m, 7d)",
            param_hint="--since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def history(
    ctx: typer.Context,
    since: Since = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="text or json (one object per change).")
    ] = "text",
    store: Store = None,
    config: Config = None,
) -> None:
    """Every change of client quotas, oldest first: when, who (principal), through what,
    which entity and key, old -> new; with no entity named, the tenant rules' and exempt
    principals' changes too. Read from the store (--config or --store)."""
    if output not in ("text", "json"):
        raise typer.BadParameter(f"{output!r}: write text or json", param_hint="--output")
    if store is None and config is None:
        raise typer.BadParameter(
            "name the store: --config gateway.toml (its [store], either backend) or "
            "--store quotagate.db",
            param_hint="--config",
        )
    pairs = entity_pairs(ctx)
    since_ms = None if since is None else parse_since(since, _now_ms())
    try:
        settings = resolve_store(store, config)
        entries = client_quota_history(settings)
        setting_changes = [] if pairs else setting_history(settings)
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_codes.UNREACHABLE) from None
    chosen: list[tuple[int, dict[str, object], str]] = [
        (entry.ts_ms, _json(entry, entity), _text(entry, entity))
        for entry in entries
        if (since_ms is None or entry.ts_ms >= since_ms)
        and matches(entity := decode_entity(entry.target), pairs)
    ]
    chosen += [
        (change.ts_ms, _setting_json(change), _setting_text(change))
        for change in setting_changes
        if since_ms is None or change.ts_ms >= since_ms
    ]
    chosen.sort(key=lambda item: item[0])  # stable: each store's own order within a ms
    if output == "json":
        typer.echo(json.dumps([document for _, document, _ in chosen], indent=2))
        return
    if not chosen:
        typer.echo("No changes match.")
    for _, _, line in chosen:
        typer.echo(line)


def _text(entry: AuditEntry, entity: dict[str, str | None]) -> str:
    return (
        f"{_iso(entry.ts_ms)} {entry.principal or '(unknown)'} "
        f"{ClientQuotaEntity.of(entity)}: {entry.quota_key} "
        f"{_show(entry.old_value)} -> {_show(entry.new_value)} ({entry.source})"
    )


def _setting_text(change: SettingChange) -> str:
    return (
        f"{_iso(change.ts_ms)} {change.principal or '(unknown)'} broker default: "
        f"{change.name} {_show_text(change.old_value)} -> {_show_text(change.new_value)} "
        f"({change.source})"
    )


def _setting_json(change: SettingChange) -> dict[str, object]:
    return {
        "time": _iso(change.ts_ms),
        "ts_ms": change.ts_ms,
        "principal": change.principal,
        "source": change.source,
        "setting": change.name,
        "old": change.old_value,
        "new": change.new_value,
    }


def _show_text(value: str | None) -> str:
    return "(none)" if value is None else repr(value)


def _json(entry: AuditEntry, entity: dict[str, str | None]) -> dict[str, object]:
    return {
        "time": _iso(entry.ts_ms),
        "ts_ms": entry.ts_ms,
        "principal": entry.principal,
        "source": entry.source,
        "entity": [{"entity_type": t, "entity_name": n} for t, n in sorted(entity.items())],
        "key": entry.quota_key,
        "old": entry.old_value,
        "new": entry.new_value,
    }


def _iso(ts_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ts_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _show(value: float | None) -> str:
    if value is None:
        return "(none)"
    return str(int(value)) if value.is_integer() else repr(value)


def _now_ms() -> int:
    return int(datetime.datetime.now(tz=datetime.UTC).timestamp() * 1000)
