"""``quotagate topic-quotas``: per-topic bytes-in thresholds in the gateway's store.

Works on the store file (as ``quotagate users`` does); a running gateway picks the change up
within a second. The same values can be set over the Kafka protocol with
IncrementalAlterConfigs on the gateway (``bytes.in.per.sec.threshold`` on a topic resource,
``total.bytes.in.per.sec.threshold`` on a broker resource). Changes are checked against the
design's rule: explicit thresholds may not sum to more than the total.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from quotagate.commands.users import resolve_store
from quotagate.quota import ThresholdError, TopicBytesInQuota
from quotagate.store.backends import QuotaBackend, StoreError, open_quota_store

app = typer.Typer(help="Describe and alter per-topic bytes-in thresholds.", no_args_is_help=True)

Store = Annotated[
    Path | None,
    typer.Option(
        "--store", help="SQLite store file (default: from --config, else ./quotagate.db)."
    ),
]
Config = Annotated[
    Path | None,
    typer.Option(
        "--config", exists=True, dir_okay=False, help="Gateway TOML config naming the store."
    ),
]


@app.command()
def describe(store: Store = None, config: Config = None) -> None:
    """Show the total threshold, explicit per-topic thresholds and the share of the others."""
    quota_store = _open(store, config)
    try:
        total = quota_store.total_threshold()
        thresholds = quota_store.topic_thresholds()
    finally:
        quota_store.close()
    typer.echo(
        "total.bytes.in.per.sec.threshold = "
        + ("(none: thresholds off)" if total is None else f"{total:g}")
    )
    for topic, value in sorted(thresholds.items()):
        typer.echo(f"topic {topic}: bytes.in.per.sec.threshold = {value:g}")
    if total is not None:
        left = total - sum(thresholds.values())
        typer.echo(f"topics without a threshold share {left:g} B/s equally")


@app.command()
def alter(
    topic: Annotated[str | None, typer.Option(help="Topic whose threshold to change.")] = None,
    threshold: Annotated[
        float | None, typer.Option(help="bytes.in.per.sec.threshold of --topic.")
    ] = None,
    total: Annotated[
        float | None, typer.Option(help="total.bytes.in.per.sec.threshold of the gateway.")
    ] = None,
    delete: Annotated[
        bool, typer.Option("--delete", help="Remove --topic's threshold (or the total).")
    ] = False,
    store: Store = None,
    config: Config = None,
) -> None:
    """Set or remove a topic's threshold or the gateway total (checked against the sum rule)."""
    if topic is None and total is None and not delete:
        raise typer.BadParameter("give --topic with --threshold/--delete, or --total")
    quota_store = _open(store, config)
    who = f"cli:{getpass.getuser()}"
    try:
        model = TopicBytesInQuota(quota_store.total_threshold(), 0)
        for name, existing in quota_store.topic_thresholds().items():
            model.set_topic_threshold(name, existing)
        if topic is not None:
            value = None if delete else threshold
            if value is None and not delete:
                raise typer.BadParameter("--topic needs --threshold or --delete")
            model.set_topic_threshold(topic, value)
            quota_store.set_topic_threshold(topic, value, who, "topic-quotas alter")
        if total is not None or (delete and topic is None):
            new_total = None if delete and topic is None else total
            model.set_total_threshold(new_total)
            quota_store.set_total_threshold(new_total, who, "topic-quotas alter")
    except ThresholdError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        quota_store.close()
    typer.echo("Completed updating thresholds.")


def _open(store: Store, config: Config) -> QuotaBackend:
    try:
        return open_quota_store(resolve_store(store, config), "quotagate-cli")
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
