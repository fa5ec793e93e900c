"""Opening the gateway's SQLite file, shared by every store (credentials, quotas, thresholds).

Each store owns a named component and an ordered list of migrations; the applied version per
component is recorded in ``schema_versions``, so stores evolve independently in one file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

# Long enough to ride out a CLI write while the gateway reads; WAL keeps readers unblocked.
BUSY_TIMEOUT_MS = 5000


def open_database(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the SQLite file at ``path`` in WAL mode, autocommit."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # Autocommit (isolation_level=None): every write states its own transaction explicitly.
    # check_same_thread=False because the gateway may verify PLAIN passwords off the loop
    # thread; callers serialise access themselves.
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_versions ("
        " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )
    return conn


def migrate(conn: sqlite3.Connection, component: str, migrations: Sequence[str]) -> int:
    """Apply the migrations of ``component`` not applied yet; return the resulting version.

    Migration *n* (1-based) is ``migrations[n - 1]``; it may hold several statements.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "SELECT version FROM schema_versions WHERE component = ?", (component,)
        ).fetchone()
        current = int(row[0]) if row else 0
        if current > len(migrations):
            raise RuntimeError(
                f"store component {component!r} is at schema version {current}, newer than this "
                f"quotagate understands ({len(migrations)})"
            )
        for script in migrations[current:]:
            for statement in _statements(script):
                conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_versions (component, version) VALUES (?, ?) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            (component, len(migrations)),
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(migrations)


def _statements(script: str) -> list[str]:
    # executescript() would commit the open transaction; split instead (no ';' inside literals).
    return [part.strip() for part in script.split(";") if part.strip()]
