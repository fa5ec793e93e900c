"""The terminal picture of a :class:`~quotagate.top.model.Snapshot` (rich renderables, pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from quotagate.top.model import (
    FleetHealth,
    Row,
    Scrape,
    Snapshot,
    ThrottleHistory,
    filter_rows,
    parse,
    sort_rows,
)

BAR_WIDTH = 16


def usage_bar(row: Row, width: int = BAR_WIDTH) -> Text:
    """Rate against quota: a bar filled to the quota, red past it, and the figures."""
    figures = f"{_si(row.rate)}/{_si(row.quota) if row.quota is not None else '∞'} {row.kind.unit}"
    usage = row.usage
    if usage is None:
        return Text(" " * width + f"  no quota  {_si(row.rate)} {row.kind.unit}", style="dim")
    filled = width if math.isinf(usage) else min(width, round(usage * width))
    style = "red" if usage > 1.0 else "yellow" if usage >= 0.8 else "green"
    bar = Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")
    percent = "∞" if math.isinf(usage) else f"{usage * 100:.0f}%"
    return bar + Text(f" {percent:>5} ", style=f"bold {style}") + Text(figures)


def shadow_text(row: Row) -> Text:
    """The shadow quota and the share of time it would throttle the key, e.g. ``51% of
    200k B/s``; "–" for a key with no shadow quota of this type."""
    if row.shadow_quota is None:
        return Text("–", style="dim")
    share = row.shadow_ratio or 0.0
    style = "red" if share >= 0.1 else "yellow" if share > 0 else "green"
    return Text(f"{share * 100:.0f}%", style=f"bold {style}") + Text(
        f" of {_si(row.shadow_quota)} {row.kind.unit}"
    )


def state_text(row: Row) -> Text:
    words = []
    if row.exempt:
        words.append(Text("EXEMPT", style="bold cyan"))
    if row.over_quota:
        words.append(Text("OVER QUOTA", style="bold red"))
    if row.throttled:
        words.append(Text("THROTTLED", style="bold magenta"))
    return Text(" ").join(words) if words else Text("ok", style="green")


def render(
    snapshot: Snapshot, rows: Sequence[Row], *, sort: str, window_s: float, clock: str
) -> RenderableType:
    """``rows``: the snapshot's rows, filtered and sorted as asked."""
    header = Text.assemble(
        ("quotagate top", "bold"),
        f"  {clock}  {snapshot.answered}/{snapshot.endpoints} endpoints  ",
        f"{len(rows)} of {len(snapshot.rows)} sharing keys  sorted by {sort}  (Ctrl-C quits)",
    )
    table = Table(expand=False, header_style="bold", pad_edge=False)
    table.add_column("type")
    table.add_column("sharing key", overflow="fold", max_width=48)
    table.add_column("rate against quota", no_wrap=True)
    table.add_column(f"throttled {window_s:g}s", justify="right")
    table.add_column("avg throttle", justify="right")
    table.add_column("conns", justify="right")
    table.add_column("quota source")
    table.add_column("state", no_wrap=True)
    # Only while some key has a shadow quota: what it would throttle (docs/quotas.md).
    shadowed = any(row.shadow_quota is not None for row in rows)
    if shadowed:
        table.add_column("shadow: would throttle", no_wrap=True)
    for row in rows:
        cells: list[RenderableType] = [
            row.kind.label,
            row.entity,
            usage_bar(row),
            "–" if row.throttled_fraction is None else f"{row.throttled_fraction * 100:.0f}%",
            "–" if not row.throttle_avg_ms else f"{row.throttle_avg_ms:,.0f} ms",
            str(row.connections),
            _source_text(row),
            state_text(row),
        ]
        if shadowed:
            cells.append(shadow_text(row))
        table.add_row(*cells)
    parts: list[RenderableType] = [header]
    if snapshot.fleet.workers:
        parts.append(fleet_text(snapshot.fleet))
    if snapshot.exempt:
        parts.append(Text.assemble(("exempt principals: ", "bold"), ", ".join(snapshot.exempt)))
    parts.extend(Text(f"unreachable: {error}", style="bold red") for error in snapshot.errors)
    if rows:
        parts.append(table)
    elif snapshot.answered:
        parts.append(
            Text(
                "no sharing key to show: no client measured against a quota yet"
                if not snapshot.rows
                else "no sharing key matches the filter",
                style="dim",
            )
        )
    return Group(*parts)


def fleet_text(fleet: FleetHealth) -> Text:
    """One line: is the fleet hearing itself, how late, and is anyone on the fallback."""
    style = "green" if not fleet.fallback else "bold red"
    echo = "–" if fleet.echo_p99_ms is None else f"{fleet.echo_p99_ms:,.0f} ms"
    fallback = (
        "off"
        if not fleet.fallback
        else f"ON (fair share for up to {fleet.silent_peers} silent peers per worker)"
    )
    return Text.assemble(
        ("fleet exchange: ", "bold"),
        (f"{fleet.healthy}/{fleet.workers} workers healthy", style),
        f"  echo p99 {echo}  fallback ",
        (fallback, style),
    )


def _source_text(row: Row) -> str:
    level = row.level
    return row.source if level is None else f"{level} {row.source}"


def _si(value: float) -> str:
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.1f}{suffix}"
    return f"{value:.3g}" if value and abs(value) < 10 else f"{value:.0f}"


def frame(
    scrapes: Sequence[Scrape],
    history: ThrottleHistory,
    now_s: float,
    *,
    sort: str = "usage",
    pattern: str | None = None,
    groups: Sequence[str] = (),
    clock: str = "",
) -> tuple[RenderableType, Snapshot]:
    """One refresh, from the endpoints' answers to the picture (and what it was made of)."""
    snapshot = parse(scrapes)
    snapshot.rows = history.update(now_s, snapshot.rows)
    rows = sort_rows(filter_rows(snapshot.rows, pattern, groups), sort)
    return render(snapshot, rows, sort=sort, window_s=history.window_s, clock=clock), snapshot
