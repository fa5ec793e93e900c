"""Client quotas and topic thresholds in the upstream's config topic (``[store] backend =
"kafka"``): the same answers as the SQLite ``QuotaStore``, shared by every process of a fleet.

Rows of the replicated table (store/replicated_table.py)::

    ["client_quota", <entity JSON>, <quota key>]  → {"value": 1048576.0, ...}
    ["topic_threshold", <topic>]                   → {"value": ...}
    ["setting", "total.bytes.in.per.sec.threshold"] → {"value": ...}
    ["text_setting", "tenant.mapping.rules"]        → {"value": "RULE:user:...", ...}

Each value also carries who changed it, through what and when (``principal``, ``source``,
``ts_ms``) and the value it replaced (``old``): the audit of a change travels with it, so a
record still reads as old -> new after the upstream compacted the one before it. A removal is
a record with ``"value": null`` and the same audit, not a tombstone, so that who removed a
quota is kept too (store/kafka_history.py reads them all). :meth:`KafkaQuotaStore.audit` lists
the latest change of every row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from quotagate.store.quotas import (
    TOTAL_THRESHOLD_SETTING,
    AuditEntry,
    Change,
    EntityKey,
    SettingChange,
    decode_entity,
    encode_entity,
    entity_key,
)
from quotagate.store.replicated_table import ReplicatedTable

CLIENT_QUOTA = "client_quota"
TOPIC_THRESHOLD = "topic_threshold"
SETTING = "setting"
TEXT_SETTING = "text_setting"
_THRESHOLD_KEY = "bytes.in.per.sec.threshold"


class KafkaQuotaStore:
    def __init__(self, table: ReplicatedTable) -> None:
        self._table = table

    def close(self) -> None:
        self._table.close()

    def data_version(self) -> int:
        return self._table.version

    def watch(self, callback: Callable[[], None]) -> None:
        """``callback`` (on the table's thread) whenever another process may have changed it."""
        self._table.watch(callback)

    # -- client quotas -------------------------------------------------------------------

    def client_quotas(self) -> dict[EntityKey, dict[str, float]]:
        result: dict[EntityKey, dict[str, float]] = {}
        for (entity, key), row in sorted(self._table.rows(CLIENT_QUOTA).items()):
            value = _value(row)
            if value is not None:
                result.setdefault(entity_key(decode_entity(entity)), {})[key] = value
        return result

    def alter_client_quotas(
        self, changes: Iterable[Change], principal: str, source: str
    ) -> list[Change]:
        """Write the changes that change anything (as KRaft: a no-op is neither written nor
        audited); each is acknowledged by the upstream before this returns."""
        applied = []
        for change in changes:
            key = (CLIENT_QUOTA, encode_entity(change.entity), change.key)
            old = _value(self._table.get(key))
            if old == change.value:
                continue
            self._table.put(key, _row(old, change.value, principal, source))
            applied.append(change)
        return applied

    # -- topic thresholds ------------------------------------------------------------------

    def topic_thresholds(self) -> dict[str, float]:
        rows = self._table.rows(TOPIC_THRESHOLD).items()
        return {t: v for (t,), row in rows if (v := _value(row)) is not None}

    def total_threshold(self) -> float | None:
        return _value(self._table.get((SETTING, TOTAL_THRESHOLD_SETTING)))

    def set_topic_threshold(
        self, topic: str, value: float | None, principal: str, source: str
    ) -> bool:
        return self._set((TOPIC_THRESHOLD, topic), value, principal, source)

    def set_total_threshold(self, value: float | None, principal: str, source: str) -> bool:
        return self._set((SETTING, TOTAL_THRESHOLD_SETTING), value, principal, source)

    def _set(self, key: tuple[str, ...], value: float | None, principal: str, source: str) -> bool:
        old = _value(self._table.get(key))
        if old == value:
            return False
        self._table.put(key, _row(old, value, principal, source))
        return True

    # -- text settings ---------------------------------------------------------------------

    def text_setting(self, name: str) -> str | None:
        row = self._table.get((TEXT_SETTING, name))
        value = None if row is None else row.get("value")
        return value if isinstance(value, str) else None

    def set_text_setting(self, name: str, value: str | None, principal: str, source: str) -> bool:
        key = (TEXT_SETTING, name)
        old = self.text_setting(name)
        if old == value:
            return False
        row: dict[str, object] = {
            "value": value,
            "old": old,
            "principal": principal,
            "source": source,
            "ts_ms": time.time_ns() // 1_000_000,
        }
        self._table.put(key, row)
        return True

    def copy_setting_history(self, changes: Iterable[SettingChange]) -> list[SettingChange]:
        """Write another store's audited changes of text settings, oldest first, as the
        records they would have been here (their time, who, through what, old -> new), for
        the settings this topic holds no record of; returns those written. The last one of a
        setting makes its value. Kept as long as the upstream's compaction keeps them, as
        every record of the topic."""
        held = {name for (name,) in self._table.rows(TEXT_SETTING)}
        written = []
        for change in changes:
            if change.name in held:
                continue
            row: dict[str, object] = {
                "value": change.new_value,
                "old": change.old_value,
                "principal": change.principal,
                "source": change.source,
                "ts_ms": change.ts_ms,
            }
            self._table.put((TEXT_SETTING, change.name), row)
            written.append(change)
        return written

    # -- audit -------------------------------------------------------------------------------

    def audit(self, limit: int = 1000) -> list[AuditEntry]:
        entries = [
            AuditEntry(
                ts_ms=_int(row.get("ts_ms")),
                principal=str(row.get("principal", "")),
                source=str(row.get("source", "")),
                kind=kind,
                target=target,
                quota_key=quota_key,
                old_value=_value(row, "old"),
                new_value=_value(row),
            )
            for kind, target, quota_key, row in self._live_rows()
        ]
        return sorted(entries, key=lambda e: e.ts_ms)[-limit:]

    def _live_rows(self) -> Iterable[tuple[str, str, str, dict[str, object]]]:
        for (entity, key), row in self._table.rows(CLIENT_QUOTA).items():
            yield CLIENT_QUOTA, entity, key, row
        for (topic,), row in self._table.rows(TOPIC_THRESHOLD).items():
            yield TOPIC_THRESHOLD, topic, _THRESHOLD_KEY, row
        for (name,), row in self._table.rows(SETTING).items():
            yield SETTING, name, name, row


def _value(row: dict[str, object] | None, field: str = "value") -> float | None:
    if row is None:
        return None
    value = row.get(field)
    return float(value) if isinstance(value, int | float) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _row(old: float | None, value: float | None, principal: str, source: str) -> dict[str, object]:
    return {
        "value": value,
        "old": old,
        "principal": principal,
        "source": source,
        "ts_ms": time.time_ns() // 1_000_000,
    }
