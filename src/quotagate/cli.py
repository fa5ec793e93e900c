"""The ``quotagate`` command: one typer app, sub-commands registered from ``commands/``."""

from __future__ import annotations

import typer

from quotagate import __version__
from quotagate.commands import (
    engine,
    pipeline,
    quotas,
    serve,
    store,
    top,
    topic_quotas,
    topics,
    users,
)

app = typer.Typer(
    name="quotagate",
    help="Kafka client quotas, faithful to Kafka, in front of any Kafka-compatible cluster.",
    no_args_is_help=True,
    add_completion=False,
    # Click's own help layout: typer's rich panels cut long option names short on an
    # 80-column terminal (--bootstrap-se…), and no setting of theirs keeps them whole.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"quotagate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Kafka client quotas, faithful to Kafka, in front of any Kafka-compatible cluster."""


app.add_typer(engine.app, name="engine")
app.add_typer(users.app, name="users")
app.add_typer(pipeline.app, name="pipeline")
app.command("serve")(serve.serve)
app.add_typer(topics.app, name="topics")
app.add_typer(quotas.app, name="quotas")
app.add_typer(topic_quotas.app, name="topic-quotas")
app.add_typer(store.app, name="store")
app.command("top")(top.top)


def main() -> None:
    app()
