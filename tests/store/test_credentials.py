"""The SQLite credential store: what it keeps, what it never keeps, and PLAIN verification."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from quotagate.security.scram import ScramMechanism, derive_keys
from quotagate.store.credentials import MIGRATIONS, CredentialStore
from quotagate.store.db import migrate, open_database

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


@pytest.fixture
def store(tmp_path: Path) -> CredentialStore:
    return CredentialStore.open(tmp_path / "gateway.db")


def test_keys_match_the_rfc_formulas_with_a_fresh_salt_per_mechanism(
    store: CredentialStore,
) -> None:
    store.set_password("alice", "s3cret-pass", iterations=4096)
    k256 = store.get("alice", SHA256)
    k512 = store.get("alice", SHA512)
    assert k256 is not None and k512 is not None
    assert k256 == derive_keys(SHA256, "s3cret-pass", k256.salt, 4096)
    assert k512 == derive_keys(SHA512, "s3cret-pass", k512.salt, 4096)
    assert k256.salt != k512.salt
    assert len(k256.salt) >= 16


def test_the_password_never_reaches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    store = CredentialStore.open(path)
    store.set_password("alice", "UnmistakablePassword123")
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"alice" in raw  # the file was written at all
    assert b"UnmistakablePassword123" not in raw


def test_a_new_password_gets_a_new_salt(store: CredentialStore) -> None:
    store.set_password("alice", "first-password")
    before = store.get("alice", SHA512)
    store.set_password("alice", "second-password")
    after = store.get("alice", SHA512)
    assert before is not None and after is not None
    assert before.salt != after.salt
    assert store.verify_password("alice", "second-password")
    assert not store.verify_password("alice", "first-password")


def test_plain_verification(store: CredentialStore) -> None:
    store.set_password("alice", "right-password")
    assert store.verify_password("alice", "right-password")
    assert not store.verify_password("alice", "wrong-password")
    assert not store.verify_password("alice", "")
    assert not store.verify_password("bob", "right-password")


def test_plain_works_with_a_single_scram_mechanism(store: CredentialStore) -> None:
    store.set_password("only256", "pw-256", mechanisms=[SHA256])
    assert store.get("only256", SHA512) is None
    assert store.verify_password("only256", "pw-256")
    assert not store.verify_password("only256", "pw-512")


def test_plain_prefers_sha512(store: CredentialStore) -> None:
    # Different passwords per mechanism make the choice observable.
    store.set_password("carol", "for-256", mechanisms=[SHA256])
    store.set_password("carol", "for-512", mechanisms=[SHA512])
    assert store.verify_password("carol", "for-512")
    assert not store.verify_password("carol", "for-256")


def test_list_and_remove(store: CredentialStore) -> None:
    store.set_password("bob", "pw-bob", iterations=4096)
    store.set_password("alice", "pw-alice", mechanisms=[SHA512], iterations=16384)
    listed = {u.username: u.iterations for u in store.users()}
    assert listed == {"alice": {SHA512: 16384}, "bob": {SHA256: 4096, SHA512: 4096}}
    assert [u.username for u in store.users()] == ["alice", "bob"]

    assert store.remove("bob", [SHA256]) == 1
    assert {u.username: set(u.iterations) for u in store.users()}["bob"] == {SHA512}
    assert store.remove("bob") == 1
    assert store.remove("bob") == 0
    assert [u.username for u in store.users()] == ["alice"]


@pytest.mark.parametrize("iterations", [4095, 16385, 0])
def test_iterations_outside_kafkas_limits_are_refused(
    store: CredentialStore, iterations: int
) -> None:
    with pytest.raises(ValueError, match="iterations"):
        store.set_password("alice", "pw", iterations=iterations)
    assert store.users() == []


@pytest.mark.parametrize("username", ["", "a\x00b", "tab\there"])
def test_bad_usernames_are_refused(store: CredentialStore, username: str) -> None:
    with pytest.raises(ValueError, match="username"):
        store.set_password(username, "pw")


def test_empty_password_and_no_mechanism_are_refused(store: CredentialStore) -> None:
    with pytest.raises(ValueError, match="password"):
        store.set_password("alice", "")
    with pytest.raises(ValueError, match="mechanism"):
        store.set_password("alice", "pw", mechanisms=[])


def test_credentials_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "gateway.db"
    first = CredentialStore.open(path)
    first.set_password("alice", "pw-alice")
    first.close()
    second = CredentialStore.open(path)
    assert second.verify_password("alice", "pw-alice")


def test_database_is_in_wal_mode_with_a_recorded_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    CredentialStore.open(path).close()
    conn = open_database(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    version = conn.execute(
        "SELECT version FROM schema_versions WHERE component = 'credentials'"
    ).fetchone()[0]
    assert version == len(MIGRATIONS)
    # Re-running is a no-op, and other components can live in the same file.
    assert migrate(conn, "credentials", MIGRATIONS) == len(MIGRATIONS)
    assert migrate(conn, "quotas", ["CREATE TABLE IF NOT EXISTS q (k TEXT PRIMARY KEY)"]) == 1


def test_a_newer_schema_is_not_silently_downgraded(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    conn = open_database(path)
    conn.execute("INSERT INTO schema_versions VALUES ('credentials', 99)")
    with pytest.raises(RuntimeError, match="newer"):
        CredentialStore(conn)


def test_failed_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    conn = open_database(tmp_path / "gateway.db")
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, "broken", ["CREATE TABLE t1 (a INTEGER); THIS IS NOT SQL"])
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "t1" not in tables
    assert conn.execute("SELECT * FROM schema_versions WHERE component='broken'").fetchall() == []
