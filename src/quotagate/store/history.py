"""Every audited change of client quotas (and of the text settings: tenant.mapping.rules,
quota.exempt.principals), from either store backend, oldest first.

SQLite keeps one ``quota_audit`` row per changed key. The Kafka store keeps the audit in the
records themselves (store/kafka_quotas.py), so the history is every record of the config
topic read from its beginning, not the fold the gateway serves from: what the upstream has
not compacted away. A record written before records carried ``old`` (or a tombstone) gets
its old value from the record before it, as the topic is read.
"""

from __future__ import annotations

from typing import Any

from quotagate.store.backends import KAFKA, StoreSettings, open_quota_store
from quotagate.store.kafka_quotas import CLIENT_QUOTA, TEXT_SETTING
from quotagate.store.quotas import AuditEntry, QuotaStore, SettingChange
from quotagate.store.replicated_table import Key

# The SQLite audit is read whole: a history is asked for by a person, and every change of
# a quota is one small row.
_ALL = 2**62


def client_quota_history(settings: StoreSettings) -> list[AuditEntry]:
    """The audited client-quota changes of the store ``settings`` names, oldest first."""
    if settings.backend == KAFKA:
        return _kafka_history(settings)
    store = open_quota_store(settings)
    try:
        return [e for e in store.audit(limit=_ALL) if e.kind == CLIENT_QUOTA]
    finally:
        store.close()


def _kafka_history(settings: StoreSettings) -> list[AuditEntry]:
    entries: list[AuditEntry] = []
    last: dict[Key, float | None] = {}

    def record(key: Key, value: dict[str, Any] | None) -> None:
        if key[0] != CLIENT_QUOTA or len(key) != 3:
            return
        new = _number(None if value is None else value.get("value"))
        old = _number(value["old"]) if value is not None and "old" in value else last.get(key)
        last[key] = new
        value = value or {}
        entries.append(
            AuditEntry(
                ts_ms=int(value.get("ts_ms", 0) or 0),
                principal=str(value.get("principal", "")),
                source=str(value.get("source", "")),
                kind=CLIENT_QUOTA,
                target=key[1],
                quota_key=key[2],
                old_value=old,
                new_value=new,
            )
        )

    # Opening reads the topic to its end, every record through ``record``; then it is done.
    open_quota_store(settings, client_id="quotagate-history", on_record=record).close()
    return entries


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def setting_history(settings: StoreSettings) -> list[SettingChange]:
    """The audited changes of the text settings of the store ``settings`` names, oldest
    first: SQLite's ``quota_text_audit``, or every ``text_setting`` record of the topic."""
    if settings.backend != KAFKA:
        store = open_quota_store(settings)
        try:
            return store.setting_audit() if isinstance(store, QuotaStore) else []
        finally:
            store.close()
    changes: list[SettingChange] = []

    def record(key: Key, value: dict[str, Any] | None) -> None:
        if key[0] != TEXT_SETTING or len(key) != 2:
            return
        value = value or {}
        old, new = value.get("old"), value.get("value")
        changes.append(
            SettingChange(
                ts_ms=int(value.get("ts_ms", 0) or 0),
                principal=str(value.get("principal", "")),
                source=str(value.get("source", "")),
                name=str(key[1]),
                old_value=old if isinstance(old, str) else None,
                new_value=new if isinstance(new, str) else None,
            )
        )

    open_quota_store(settings, client_id="quotagate-history", on_record=record).close()
    return changes
