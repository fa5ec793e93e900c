"""Client quotas, per-topic bytes-in thresholds and an audit of every change, in the store.

Lives in the same SQLite file as the credentials (component ``quotas``). The gateway keeps the
values in memory and re-reads them when another process changed the file (SQLite's
``data_version``), so a change made through any gateway or the CLI acts without a restart.
Every change, whoever made it, adds one row per key to ``quota_audit``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from quotagate.store.db import migrate, open_database

COMPONENT = "quotas"
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS client_quotas (
        entity      TEXT NOT NULL,
        quota_key   TEXT NOT NULL,
        value       REAL NOT NULL,
        updated_ms  INTEGER NOT NULL,
        PRIMARY KEY (entity, quota_key)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS topic_thresholds (
        topic       TEXT PRIMARY KEY,
        value       REAL NOT NULL,
        updated_ms  INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS quota_settings (
        name        TEXT PRIMARY KEY,
        value       REAL NOT NULL,
        updated_ms  INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS quota_audit (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms       INTEGER NOT NULL,
        principal   TEXT NOT NULL,
        source      TEXT NOT NULL,
        kind        TEXT NOT NULL CHECK (kind IN ('client_quota', 'topic_threshold', 'setting')),
        target      TEXT NOT NULL,
        quota_key   TEXT NOT NULL,
        old_value   REAL,
        new_value   REAL
    )
    """,
    # Settings whose value is text (tenant.mapping.rules, quota.exempt.principals).
    """
    CREATE TABLE IF NOT EXISTS quota_text_settings (
        name        TEXT PRIMARY KEY,
        value       TEXT NOT NULL,
        updated_ms  INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    # Their audit: text values, so beside quota_audit (whose values are numbers).
    """
    CREATE TABLE IF NOT EXISTS quota_text_audit (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms       INTEGER NOT NULL,
        principal   TEXT NOT NULL,
        source      TEXT NOT NULL,
        name        TEXT NOT NULL,
        old_value   TEXT,
        new_value   TEXT
    )
    """,
)

TOTAL_THRESHOLD_SETTING = "total.bytes.in.per.sec.threshold"
TENANT_MAPPING_RULES_SETTING = "tenant.mapping.rules"
EXEMPT_PRINCIPALS_SETTING = "quota.exempt.principals"
TEXT_SETTINGS = (TENANT_MAPPING_RULES_SETTING, EXEMPT_PRINCIPALS_SETTING)

Entity = Mapping[str, str | None]
EntityKey = tuple[tuple[str, str | None], ...]


def entity_key(entity: Entity) -> EntityKey:
    """A canonical, hashable form of an entity (types sorted; None names the default)."""
    return tuple(sorted(entity.items(), key=lambda item: item[0]))


def encode_entity(entity: Entity) -> str:
    return json.dumps([list(pair) for pair in entity_key(entity)], separators=(",", ":"))


def decode_entity(text: str) -> dict[str, str | None]:
    return {str(t): (None if n is None else str(n)) for t, n in json.loads(text)}


@dataclass(frozen=True, slots=True)
class AuditEntry:
    ts_ms: int
    principal: str
    source: str
    kind: str
    target: str
    quota_key: str
    old_value: float | None
    new_value: float | None


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One audited change of a text setting (``TEXT_SETTINGS``); None: not set."""

    ts_ms: int
    principal: str
    source: str
    name: str
    old_value: str | None
    new_value: str | None


@dataclass(frozen=True, slots=True)
class Change:
    """One key of one entity: set to ``value``, or removed when ``value`` is None."""

    entity: dict[str, str | None]
    key: str
    value: float | None


class QuotaStore:
    """Thread-safe access to the quota tables (one connection, serialised by a lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        migrate(conn, COMPONENT, MIGRATIONS)

    @classmethod
    def open(cls, path: str | Path) -> QuotaStore:
        return cls(open_database(path))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def data_version(self) -> int:
        """Changes whenever *another* connection committed to the file."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    # -- client quotas -------------------------------------------------------------------

    def client_quotas(self) -> dict[EntityKey, dict[str, float]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT entity, quota_key, value FROM client_quotas ORDER BY entity, quota_key"
            ).fetchall()
        result: dict[EntityKey, dict[str, float]] = {}
        for entity, key, value in rows:
            result.setdefault(entity_key(decode_entity(entity)), {})[key] = float(value)
        return result

    def alter_client_quotas(
        self, changes: Iterable[Change], principal: str, source: str
    ) -> list[Change]:
        """Apply changes in one transaction; returns those that changed anything.

        Setting a key to its current value or removing an absent key writes nothing (as
        KRaft's ClientQuotaControlManager), and is not audited.
        """
        now = _now_ms()
        applied: list[Change] = []
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for change in changes:
                    encoded = encode_entity(change.entity)
                    row = conn.execute(
                        "SELECT value FROM client_quotas WHERE entity = ? AND quota_key = ?",
                        (encoded, change.key),
                    ).fetchone()
                    old = None if row is None else float(row[0])
                    if old == change.value:
                        continue
                    if change.value is None:
                        conn.execute(
                            "DELETE FROM client_quotas WHERE entity = ? AND quota_key = ?",
                            (encoded, change.key),
                        )
                    else:
                        conn.execute(
                            "INSERT INTO client_quotas (entity, quota_key, value, updated_ms) "
                            "VALUES (?, ?, ?, ?) ON CONFLICT (entity, quota_key) DO UPDATE "
                            "SET value = excluded.value, updated_ms = excluded.updated_ms",
                            (encoded, change.key, change.value, now),
                        )
                    self._audit(
                        now, principal, source, "client_quota", encoded, change.key, old,
                        change.value,
                    )  # fmt: skip
                    applied.append(change)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return applied

    # -- topic thresholds ------------------------------------------------------------------

    def topic_thresholds(self) -> dict[str, float]:
        with self._lock:
            rows = self._conn.execute("SELECT topic, value FROM topic_thresholds").fetchall()
        return {str(topic): float(value) for topic, value in rows}

    def total_threshold(self) -> float | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM quota_settings WHERE name = ?", (TOTAL_THRESHOLD_SETTING,)
            ).fetchone()
        return None if row is None else float(row[0])

    def set_topic_threshold(
        self, topic: str, value: float | None, principal: str, source: str
    ) -> bool:
        return self._set_value(
            "topic_thresholds", "topic", topic, "topic_threshold", value, principal, source
        )

    def set_total_threshold(self, value: float | None, principal: str, source: str) -> bool:
        return self._set_value(
            "quota_settings", "name", TOTAL_THRESHOLD_SETTING, "setting", value, principal, source
        )

    def _set_value(
        self,
        table: str,
        column: str,
        name: str,
        kind: str,
        value: float | None,
        principal: str,
        source: str,
    ) -> bool:
        now = _now_ms()
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    f"SELECT value FROM {table} WHERE {column} = ?", (name,)
                ).fetchone()
                old = None if row is None else float(row[0])
                if old == value:
                    conn.execute("ROLLBACK")
                    return False
                if value is None:
                    conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (name,))
                else:
                    conn.execute(
                        f"INSERT INTO {table} ({column}, value, updated_ms) VALUES (?, ?, ?) "
                        f"ON CONFLICT ({column}) DO UPDATE SET value = excluded.value, "
                        "updated_ms = excluded.updated_ms",
                        (name, value, now),
                    )
                key = TOTAL_THRESHOLD_SETTING if kind == "setting" else "bytes.in.per.sec.threshold"
                self._audit(now, principal, source, kind, name, key, old, value)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return True

    # -- text settings ---------------------------------------------------------------------

    def text_setting(self, name: str) -> str | None:
        """A setting whose value is text (``TEXT_SETTINGS``); None when none is stored."""
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM quota_text_settings WHERE name = ?", (name,)
            ).fetchone()
        return None if row is None else str(row[0])

    def set_text_setting(self, name: str, value: str | None, principal: str, source: str) -> bool:
        """Store (None: remove) a text setting, audited in ``quota_text_audit``; False when it
        already was so."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT value FROM quota_text_settings WHERE name = ?", (name,)
                ).fetchone()
                old = None if row is None else str(row[0])
                if old == value:
                    conn.execute("ROLLBACK")
                    return False
                conn.execute(
                    "INSERT INTO quota_text_audit (ts_ms, principal, source, name, old_value, "
                    "new_value) VALUES (?, ?, ?, ?, ?, ?)",
                    (_now_ms(), principal, source, name, old, value),
                )
                if value is None:
                    conn.execute("DELETE FROM quota_text_settings WHERE name = ?", (name,))
                else:
                    conn.execute(
                        "INSERT INTO quota_text_settings (name, value, updated_ms) VALUES "
                        "(?, ?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value, "
                        "updated_ms = excluded.updated_ms",
                        (name, value, _now_ms()),
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        return True

    # -- audit -------------------------------------------------------------------------------

    def audit(self, limit: int = 1000) -> list[AuditEntry]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT ts_ms, principal, source, kind, target, quota_key, old_value, new_value "
                "FROM quota_audit ORDER BY id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [AuditEntry(*row) for row in reversed(rows)]

    def setting_audit(self) -> list[SettingChange]:
        """Every audited change of the text settings, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT ts_ms, principal, source, name, old_value, new_value "
                "FROM quota_text_audit ORDER BY id"
            ).fetchall()
        return [SettingChange(*row) for row in rows]

    def _audit(
        self,
        now: int,
        principal: str,
        source: str,
        kind: str,
        target: str,
        key: str,
        old: float | None,
        new: float | None,
    ) -> None:
        self._conn.execute(
            "INSERT INTO quota_audit (ts_ms, principal, source, kind, target, quota_key, "
            "old_value, new_value) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (now, principal, source, kind, target, key, old, new),
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
