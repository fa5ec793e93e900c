"""``quotagate engine``: ask the quota engine a question from the command line."""

from __future__ import annotations

import random

import typer
from rich.console import Console
from rich.table import Table

from quotagate.quota import DEFAULT, ClientQuotaManager, ControllerMutationQuotaManager
from quotagate.quota.backoff import ExponentialBackoff

app = typer.Typer(help="Run the quota engine on numbers you give it.", no_args_is_help=True)
_T0 = 1_700_000_000_000


def _parse_records(text: str) -> list[tuple[int, float]]:
    records = []
    for item in text.split(","):
        try:
            at, value = item.split(":")
            records.append((int(at), float(value)))
        except ValueError:
            raise typer.BadParameter(
                f"{item!r} is not OFFSET_MS:VALUE; write e.g. --records 0:400,1000:400,10500:2300"
            ) from None
    return records


@app.command()
def throttle(
    quota: float = typer.Option(..., help="Quota bound (bytes/s, percent or mutations/s)."),
    records: str = typer.Option(
        ..., help="Comma-separated OFFSET_MS:VALUE pairs, offsets from an arbitrary start."
    ),
    quota_type: str = typer.Option(
        "produce", "--type", help="produce, fetch, request or controller_mutation."
    ),
    window_num: int = typer.Option(11, help="quota.window.num", min=1),
    window_size_s: int = typer.Option(1, help="quota.window.size.seconds", min=1),
) -> None:
    """Record values for one client and print the throttle Kafka would answer each with."""
    manager: ClientQuotaManager
    if quota_type in ("controller_mutation", "controller_mutation_rate"):
        manager = ControllerMutationQuotaManager(window_num, window_size_s)
    else:
        try:
            manager = ClientQuotaManager(quota_type, window_num, window_size_s)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--type") from None
    manager.update_quota(None, DEFAULT, quota)
    table = Table("offset ms", "value", "throttle ms")
    for at, value in _parse_records(records):
        throttle_ms = manager.record_and_get_throttle_ms("ANONYMOUS", "cli", value, _T0 + at)
        table.add_row(str(at), f"{value:g}", str(throttle_ms))
    Console().print(table)


@app.command()
def backoff(
    initial_ms: int = typer.Option(100, help="retry.backoff.ms", min=0),
    max_ms: int = typer.Option(1000, help="retry.backoff.max.ms", min=0),
    multiplier: float = typer.Option(2.0),
    jitter: float = typer.Option(0.2, min=0.0, max=0.99),
    attempts: int = typer.Option(8, min=1),
    seed: int | None = typer.Option(None, help="Seed the jitter for a repeatable answer."),
) -> None:
    """Print the KIP-580 backoff for each attempt."""
    policy = ExponentialBackoff(initial_ms, multiplier, max_ms, jitter, rng=random.Random(seed))
    table = Table("attempt", "backoff ms")
    for attempt in range(attempts):
        table.add_row(str(attempt), str(policy.backoff(attempt)))
    Console().print(table)
