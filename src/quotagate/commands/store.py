"""``quotagate store migrate``: copy a SQLite store into the upstream's config topic."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotagate.commands.plugins import load_gateway_config
from quotagate.gateway import ConfigError, store_settings
from quotagate.store.backends import (
    KAFKA,
    StoreError,
    StoreSettings,
    open_credentials,
    open_quota_store,
)
from quotagate.store.history import setting_history
from quotagate.store.quotas import TEXT_SETTINGS, Change

app = typer.Typer(help="The gateway's store: quotas, thresholds and credentials.")

MIGRATION = "store migrate"


@app.command()
def migrate(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            exists=True,
            dir_okay=False,
            help='Gateway config whose [store] is backend = "kafka" (the destination).',
        ),
    ],
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            dir_okay=False,
            help="SQLite store to copy (default: the [store] path of --config).",
        ),
    ] = None,
) -> None:
    """Copy every client quota, topic threshold, text setting (with its audited history) and
    SCRAM credential of a SQLite store into the config topic. Idempotent: what the topic
    already holds is left alone."""
    try:
        settings = load_gateway_config(config)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    destination = store_settings(settings)
    if destination.backend != KAFKA:
        raise typer.BadParameter(
            'its [store] backend is "sqlite": set backend = "kafka" (and [upstream] '
            "bootstrap.servers) to migrate into the upstream's config topic",
            param_hint="--config",
        )
    origin = StoreSettings(path=str(source or settings.store_path))
    if not Path(origin.path).exists():
        raise typer.BadParameter(f"no SQLite store at {origin.path}", param_hint="--from")
    try:
        counts = _copy(origin, destination)
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"Migrated {origin.describe()} into {destination.describe()}:")
    for what, (written, present) in counts.items():
        typer.echo(f"  {what}: {written} written, {present} already there")
    typer.echo(
        "  (setting history: each audited change of tenant.mapping.rules and "
        "quota.exempt.principals, as it was, for a setting the topic held no record of; the "
        "topic is compacted, so the upstream keeps older changes only until it compacts them)"
    )


def _copy(origin: StoreSettings, destination: StoreSettings) -> dict[str, tuple[int, int]]:
    old_quotas, new_quotas = open_quota_store(origin), open_quota_store(destination, "migrate")
    try:
        changes = [
            Change(dict(entity), key, value)
            for entity, values in old_quotas.client_quotas().items()
            for key, value in values.items()
        ]
        written = new_quotas.alter_client_quotas(changes, "quotagate", MIGRATION)
        quotas = (len(written), len(changes) - len(written))
        thresholds = old_quotas.topic_thresholds()
        total = old_quotas.total_threshold()
        # The total first: a topic threshold is checked against it where it is applied.
        moved = [new_quotas.set_total_threshold(total, "quotagate", MIGRATION)] if total else []
        moved += [
            new_quotas.set_topic_threshold(topic, value, "quotagate", MIGRATION)
            for topic, value in thresholds.items()
        ]
        # The tenant settings (issue 25) count with the thresholds: the store's settings.
        # Their audit goes first, as it was (who, when, through what), for every setting the
        # topic has no record of; a value the audit does not end with is then set.
        from quotagate.store.kafka_quotas import KafkaQuotaStore  # noqa: PLC0415 (librdkafka)

        assert isinstance(new_quotas, KafkaQuotaStore)  # migrate's destination is the topic
        history = setting_history(origin)
        copied_history = new_quotas.copy_setting_history(history)
        with_history = {change.name for change in copied_history}
        for name in TEXT_SETTINGS:
            text = old_quotas.text_setting(name)
            if text is None and name not in with_history:
                continue
            changed = new_quotas.set_text_setting(name, text, "quotagate", MIGRATION)
            moved.append(changed or name in with_history)
        threshold_counts = (sum(moved), len(moved) - sum(moved))
    finally:
        old_quotas.close()
        new_quotas.close()
    old_users, new_users = open_credentials(origin), open_credentials(destination, "migrate")
    try:
        copied = present = 0
        for user in old_users.users():
            for mechanism in user.iterations:
                keys = old_users.get(user.username, mechanism)
                if keys is None:
                    continue
                if new_users.get(user.username, mechanism) == keys:
                    present += 1
                    continue
                new_users.put(user.username, mechanism, keys)
                copied += 1
    finally:
        old_users.close()
        new_users.close()
    return {
        "client quotas": quotas,
        "topic thresholds": threshold_counts,
        "setting history": (len(copied_history), len(history) - len(copied_history)),
        "SCRAM credentials": (copied, present),
    }
