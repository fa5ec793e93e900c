"""The upstream-backed store: one configuration for every process of a fleet (real tansu)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.gateway.embedded import TansuBroker, free_port
from quotagate.store.backends import (
    KAFKA,
    StoreError,
    StoreSettings,
    open_credentials,
    open_quota_store,
)
from quotagate.store.credentials import CredentialStore
from quotagate.store.history import setting_history
from quotagate.store.quotas import Change, QuotaStore, entity_key

pytestmark = pytest.mark.integration

ALICE = {"user": "alice"}


def _settings(tansu: TansuBroker, topic: str) -> StoreSettings:
    return StoreSettings(backend=KAFKA, topic=topic, bootstrap=tansu.bootstrap)


def _eventually(condition: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_change_made_by_one_process_reaches_the_others(tansu: TansuBroker) -> None:
    settings = _settings(tansu, f"_cfg-{uuid.uuid4().hex[:8]}")
    first, second = open_quota_store(settings), open_quota_store(settings)
    changed: list[int] = []
    second.watch(lambda: changed.append(second.data_version()))
    try:
        applied = first.alter_client_quotas(
            [Change(ALICE, "producer_byte_rate", 1024.0)], "User:admin", "test"
        )
        assert len(applied) == 1
        want = {entity_key(ALICE): {"producer_byte_rate": 1024.0}}
        assert first.client_quotas() == want  # the writer sees it at once
        _eventually(lambda: second.client_quotas() == want, "the second store")
        assert changed
        # Setting a value it already has writes nothing, as KRaft does.
        assert (
            first.alter_client_quotas(
                [Change(ALICE, "producer_byte_rate", 1024.0)], "User:admin", "test"
            )
            == []
        )
        assert first.set_topic_threshold("orders", 5000.0, "User:admin", "test")
        assert first.set_total_threshold(9000.0, "User:admin", "test")
        _eventually(lambda: second.topic_thresholds() == {"orders": 5000.0}, "the threshold")
        _eventually(lambda: second.total_threshold() == 9000.0, "the total")
        first.alter_client_quotas([Change(ALICE, "producer_byte_rate", None)], "admin", "test")
        _eventually(lambda: second.client_quotas() == {}, "the removal")
        audit = first.audit()
        assert {(e.kind, e.target) for e in audit} == {
            ("client_quota", '[["user","alice"]]'),
            ("topic_threshold", "orders"),
            ("setting", "total.bytes.in.per.sec.threshold"),
        }
        # A removal keeps who made it and what it removed (a record, not a tombstone).
        removal = next(e for e in audit if e.kind == "client_quota")
        assert (removal.principal, removal.old_value, removal.new_value) == ("admin", 1024.0, None)
    finally:
        first.close()
        second.close()
    reopened = open_quota_store(settings)
    try:
        assert reopened.topic_thresholds() == {"orders": 5000.0}
        assert reopened.client_quotas() == {}
    finally:
        reopened.close()


def test_the_last_write_in_the_topic_wins_everywhere(tansu: TansuBroker) -> None:
    settings = _settings(tansu, f"_cfg-{uuid.uuid4().hex[:8]}")
    stores = [open_quota_store(settings) for _ in range(3)]
    try:
        for value, store in zip((100.0, 200.0, 300.0), stores, strict=True):
            store.alter_client_quotas([Change(ALICE, "consumer_byte_rate", value)], "a", "t")
        want = {entity_key(ALICE): {"consumer_byte_rate": 300.0}}
        for store in stores:
            _eventually(lambda s=store: s.client_quotas() == want, "agreement")
    finally:
        for store in stores:
            store.close()


def test_a_record_it_cannot_read_is_skipped(tansu: TansuBroker) -> None:
    settings = _settings(tansu, f"_cfg-{uuid.uuid4().hex[:8]}")
    store = open_quota_store(settings)
    store.alter_client_quotas([Change(ALICE, "request_percentage", 50.0)], "a", "t")
    store.close()
    producer = Producer({"bootstrap.servers": tansu.bootstrap})
    for key, value in ((b"not json", b"{}"), (b'["client_quota"]', b"[1]"), (None, b"x")):
        producer.produce(settings.topic, key=key, value=value)
    producer.flush(10)
    reopened = open_quota_store(settings)
    try:
        assert reopened.client_quotas() == {entity_key(ALICE): {"request_percentage": 50.0}}
    finally:
        reopened.close()


def test_credentials_are_shared(tansu: TansuBroker) -> None:
    settings = _settings(tansu, f"_cfg-{uuid.uuid4().hex[:8]}")
    writer, reader = open_credentials(settings), open_credentials(settings)
    try:
        writer.set_password("alice", "s3cret", iterations=4096)
        _eventually(lambda: reader.users() != [], "the user")
        assert reader.verify_password("alice", "s3cret")
        assert not reader.verify_password("alice", "wrong")
        assert writer.remove("alice") == 2
        _eventually(lambda: reader.users() == [], "the removal")
    finally:
        writer.close()
        reader.close()


def test_an_unreachable_upstream_is_a_clear_error_in_seconds() -> None:
    settings = StoreSettings(backend=KAFKA, topic="t", bootstrap=f"127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot reach the upstream"):
        open_quota_store(settings)
    assert time.monotonic() - started < 15


def test_migrate_copies_a_sqlite_store_once(tansu: TansuBroker, tmp_path: Path) -> None:
    sqlite = tmp_path / "old.db"
    quotas = QuotaStore.open(sqlite)
    quotas.alter_client_quotas(
        [
            Change(ALICE, "producer_byte_rate", 1e6),
            Change({"client-id": None}, "consumer_byte_rate", 2e6),
        ],
        "admin",
        "test",
    )
    quotas.set_total_threshold(1e7, "admin", "test")
    quotas.set_topic_threshold("orders", 1e6, "admin", "test")
    quotas.close()
    credentials = CredentialStore.open(sqlite)
    credentials.set_password("bob", "pw", iterations=4096)
    credentials.close()
    topic = f"_cfg-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "q.toml"
    config.write_text(
        f'[upstream]\nbootstrap.servers = "{tansu.bootstrap}"\n'
        f'[store]\nbackend = "kafka"\ntopic = "{topic}"\npath = "{sqlite}"\n'
    )
    runner = CliRunner()
    first = runner.invoke(app, ["store", "migrate", "--config", str(config)])
    assert first.exit_code == 0, first.output
    assert "client quotas: 2 written, 0 already there" in first.output
    assert "topic thresholds: 2 written" in first.output
    assert "SCRAM credentials: 2 written" in first.output
    again = runner.invoke(app, ["store", "migrate", "--config", str(config)])
    assert again.exit_code == 0, again.output
    assert "client quotas: 0 written, 2 already there" in again.output
    assert "SCRAM credentials: 0 written, 2 already there" in again.output
    migrated = open_quota_store(_settings(tansu, topic))
    users = open_credentials(_settings(tansu, topic))
    try:
        assert migrated.total_threshold() == 1e7
        assert migrated.topic_thresholds() == {"orders": 1e6}
        assert len(migrated.client_quotas()) == 2
        assert users.verify_password("bob", "pw")
    finally:
        migrated.close()
        users.close()


def test_migrate_needs_a_kafka_destination(tmp_path: Path) -> None:
    config = tmp_path / "q.toml"
    config.write_text('[store]\npath = "x.db"\n')
    result = CliRunner().invoke(app, ["store", "migrate", "--config", str(config)])
    assert result.exit_code == 2
    text = " ".join(result.output.replace("│", " ").split())
    assert 'set backend = "kafka"' in text


def test_tenant_settings_are_shared_and_migrated(tansu: TansuBroker, tmp_path: Path) -> None:
    """``tenant.mapping.rules`` and ``quota.exempt.principals`` (issue 25): text settings that
    every process of a fleet reads, that ``store migrate`` copies, and that a delete removes."""
    rules = "RULE:user:^(.*)-svc$/$1/"
    sqlite = QuotaStore.open(tmp_path / "q.db")
    assert sqlite.text_setting("tenant.mapping.rules") is None
    assert sqlite.set_text_setting("tenant.mapping.rules", rules, "User:admin", "test")
    assert not sqlite.set_text_setting("tenant.mapping.rules", rules, "User:admin", "test")
    assert sqlite.set_text_setting("quota.exempt.principals", "User:canary", "User:a", "test")
    exempt = "quota.exempt.principals"
    assert sqlite.set_text_setting(exempt, "User:canary,User:mm2", "User:b", "IAC")
    assert sqlite.set_text_setting(exempt, "User:canary", "User:c", "IAC")
    recorded = sqlite.setting_audit()
    sqlite.close()
    topic = f"_cfg-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "q.toml"
    config.write_text(
        f'[upstream]\nbootstrap.servers = "{tansu.bootstrap}"\n'
        f'[store]\nbackend = "kafka"\ntopic = "{topic}"\npath = "{tmp_path / "q.db"}"\n'
    )
    result = CliRunner().invoke(app, ["store", "migrate", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "setting history: 4 written, 0 already there" in result.output
    settings = _settings(tansu, topic)
    # The audit came along as it was: who, when, through what, old -> new; nothing more.
    assert setting_history(settings) == recorded
    again = CliRunner().invoke(app, ["store", "migrate", "--config", str(config)])
    assert "setting history: 0 written, 4 already there" in again.output, again.output
    assert setting_history(settings) == recorded
    first, second = open_quota_store(settings), open_quota_store(settings)
    try:
        assert first.text_setting("tenant.mapping.rules") == rules
        assert first.text_setting("quota.exempt.principals") == "User:canary"
        assert first.set_text_setting("tenant.mapping.rules", None, "User:admin", "test")
        _eventually(lambda: second.text_setting("tenant.mapping.rules") is None, "the second store")
        assert second.text_setting("quota.exempt.principals") == "User:canary"
    finally:
        first.close()
        second.close()
