"""The quota store: idempotent changes, every one audited."""

from __future__ import annotations

from pathlib import Path

from quotagate.store.quotas import Change, QuotaStore


def test_quota_store_is_idempotent_and_audited(tmp_path: Path) -> None:
    store = QuotaStore.open(tmp_path / "q.db")
    entity = {"user": "alice", "client-id": None}
    applied = store.alter_client_quotas(
        [Change(entity, "producer_byte_rate", 10.0), Change(entity, "request_percentage", 5.0)],
        "User:admin",
        "test",
    )
    assert len(applied) == 2
    assert store.alter_client_quotas([Change(entity, "producer_byte_rate", 10.0)], "x", "t") == []
    assert (
        store.alter_client_quotas([Change({"user": "b"}, "producer_byte_rate", None)], "x", "t")
        == []
    )
    store.alter_client_quotas([Change(entity, "request_percentage", None)], "User:admin", "test")
    assert store.client_quotas() == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 10.0}
    }
    assert [(a.quota_key, a.old_value, a.new_value) for a in store.audit()] == [
        ("producer_byte_rate", None, 10.0),
        ("request_percentage", None, 5.0),
        ("request_percentage", 5.0, None),
    ]
    assert store.set_topic_threshold("t", 5.0, "u", "s")
    assert not store.set_topic_threshold("t", 5.0, "u", "s")
    assert store.topic_thresholds() == {"t": 5.0}
