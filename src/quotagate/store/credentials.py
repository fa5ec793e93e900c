"""SCRAM credentials per user and mechanism in the SQLite store; never a password.

PLAIN logins are checked against the same SCRAM entry by deriving the keys from the presented
password, so one ``quotagate users add`` serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
"""

from __future__ import annotations

import abc
import hmac
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from quotagate.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramKeys,
    ScramMechanism,
    derive_keys,
)
from quotagate.store.db import migrate, open_database

COMPONENT = "credentials"
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS scram_credentials (
        username    TEXT    NOT NULL,
        mechanism   TEXT    NOT NULL CHECK (mechanism IN ('SCRAM-SHA-256', 'SCRAM-SHA-512')),
        salt        BLOB    NOT NULL,
        iterations  INTEGER NOT NULL,
        stored_key  BLOB    NOT NULL,
        server_key  BLOB    NOT NULL,
        updated_ms  INTEGER NOT NULL,
        PRIMARY KEY (username, mechanism)
    ) WITHOUT ROWID
    """,
)

DEFAULT_ITERATIONS = 8192
SALT_BYTES = 32
# PLAIN prefers the stronger hash when a user has both.
PLAIN_PREFERENCE = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)


@dataclass(frozen=True, slots=True)
class UserEntry:
    username: str
    iterations: dict[ScramMechanism, int]


def validate_username(username: str) -> None:
    # NUL separates PLAIN fields; control characters have no business in a principal name.
    if not username:
        raise ValueError("username must not be empty")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in username):
        raise ValueError("username must not contain control characters")


def validate_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS} (Kafka's limits)"
        )


class Credentials(abc.ABC):
    """What every credential backend shares: passwords become salted SCRAM keys here, and
    PLAIN logins are checked against them; the backends only store and fetch keys."""

    def __init__(self) -> None:
        self._decoy: ScramKeys | None = None

    @abc.abstractmethod
    def put(self, username: str, mechanism: ScramMechanism, keys: ScramKeys) -> None: ...

    @abc.abstractmethod
    def get(self, username: str, mechanism: ScramMechanism) -> ScramKeys | None: ...

    @abc.abstractmethod
    def remove(self, username: str, mechanisms: Iterable[ScramMechanism] | None = None) -> int:
        """Delete the user's credentials (all, or the given mechanisms); return how many."""

    @abc.abstractmethod
    def users(self) -> list[UserEntry]: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def set_password(
        self,
        username: str,
        password: str,
        mechanisms: Iterable[ScramMechanism] = tuple(ScramMechanism),
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        """Create or replace the user's credentials for each mechanism, with a fresh salt each."""
        validate_username(username)
        validate_iterations(iterations)
        if not password:
            raise ValueError("password must not be empty")
        keys = [
            (m, derive_keys(m, password, secrets.token_bytes(SALT_BYTES), iterations))
            for m in dict.fromkeys(mechanisms)
        ]
        if not keys:
            raise ValueError("at least one mechanism is required")
        for mechanism, entry in keys:
            self.put(username, mechanism, entry)

    def verify_password(self, username: str, password: str) -> bool:
        """PLAIN check: derive the stored keys from ``password`` and compare in constant time."""
        for mechanism in PLAIN_PREFERENCE:
            stored = self.get(username, mechanism)
            if stored is not None:
                return _matches(mechanism, stored, password)
        # Unknown users are checked against a decoy, so a miss costs as much as a hit.
        if self._decoy is None:
            self._decoy = derive_keys(
                ScramMechanism.SCRAM_SHA_512,
                secrets.token_hex(16),
                secrets.token_bytes(SALT_BYTES),
                DEFAULT_ITERATIONS,
            )
        _matches(ScramMechanism.SCRAM_SHA_512, self._decoy, password)
        return False


class CredentialStore(Credentials):
    """Salted, iterated SCRAM credentials (RFC 5802, RFC 7677) in one SQLite table."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__()
        self._conn = conn
        self._lock = threading.Lock()
        migrate(conn, COMPONENT, MIGRATIONS)

    @classmethod
    def open(cls, path: str | Path) -> CredentialStore:
        return cls(open_database(path))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def put(self, username: str, mechanism: ScramMechanism, keys: ScramKeys) -> None:
        """Store already derived keys (e.g. computed by another tool from the same formulas)."""
        validate_username(username)
        validate_iterations(keys.iterations)
        now_ms = int(time.time() * 1000)
        with self._lock:
            self._conn.execute(
                "INSERT INTO scram_credentials"
                " (username, mechanism, salt, iterations, stored_key, server_key, updated_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (username, mechanism) DO UPDATE SET"
                " salt = excluded.salt, iterations = excluded.iterations,"
                " stored_key = excluded.stored_key, server_key = excluded.server_key,"
                " updated_ms = excluded.updated_ms",
                (
                    username,
                    mechanism.value,
                    keys.salt,
                    keys.iterations,
                    keys.stored_key,
                    keys.server_key,
                    now_ms,
                ),
            )

    def get(self, username: str, mechanism: ScramMechanism) -> ScramKeys | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT salt, iterations, stored_key, server_key FROM scram_credentials"
                " WHERE username = ? AND mechanism = ?",
                (username, mechanism.value),
            ).fetchone()
        if row is None:
            return None
        return ScramKeys(
            salt=bytes(row[0]),
            iterations=int(row[1]),
            stored_key=bytes(row[2]),
            server_key=bytes(row[3]),
        )

    def remove(self, username: str, mechanisms: Iterable[ScramMechanism] | None = None) -> int:
        """Delete the user's credentials (all, or the given mechanisms); return rows removed."""
        with self._lock:
            if mechanisms is None:
                cursor = self._conn.execute(
                    "DELETE FROM scram_credentials WHERE username = ?", (username,)
                )
                return cursor.rowcount
            removed = 0
            for mechanism in dict.fromkeys(mechanisms):
                cursor = self._conn.execute(
                    "DELETE FROM scram_credentials WHERE username = ? AND mechanism = ?",
                    (username, mechanism.value),
                )
                removed += cursor.rowcount
            return removed

    def users(self) -> list[UserEntry]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT username, mechanism, iterations FROM scram_credentials"
                " ORDER BY username, mechanism"
            ).fetchall()
        entries: dict[str, dict[ScramMechanism, int]] = {}
        for username, mechanism, iterations in rows:
            entries.setdefault(username, {})[ScramMechanism(mechanism)] = int(iterations)
        return [UserEntry(name, mechs) for name, mechs in entries.items()]


def _matches(mechanism: ScramMechanism, stored: ScramKeys, password: str) -> bool:
    derived = derive_keys(mechanism, password, stored.salt, stored.iterations)
    # Both keys, combined without short-circuit, so timing says nothing about which differed.
    stored_ok = hmac.compare_digest(derived.stored_key, stored.stored_key)
    server_ok = hmac.compare_digest(derived.server_key, stored.server_key)
    return stored_ok & server_ok
