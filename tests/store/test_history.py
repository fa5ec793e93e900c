"""Every client-quota change from either store backend, oldest first (real tansu, real SQLite)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from quotagate.gateway.embedded import TansuBroker
from quotagate.store.backends import KAFKA, StoreSettings, open_quota_store
from quotagate.store.history import client_quota_history
from quotagate.store.quotas import Change, encode_entity

ALICE = {"user": "alice"}


def _changes(settings: StoreSettings) -> None:
    store = open_quota_store(settings)
    try:
        store.alter_client_quotas([Change(ALICE, "producer_byte_rate", 1024.0)], "User:a", "t")
        store.set_topic_threshold("orders", 10.0, "User:a", "t")  # not a client quota
        store.alter_client_quotas([Change(ALICE, "producer_byte_rate", 2048.0)], "User:b", "t")
        store.alter_client_quotas([Change(ALICE, "producer_byte_rate", None)], "User:c", "t")
    finally:
        store.close()


def _summary(settings: StoreSettings) -> list[tuple[str, str, float | None, float | None]]:
    return [
        (e.principal, e.target, e.old_value, e.new_value) for e in client_quota_history(settings)
    ]


EXPECTED = [
    ("User:a", '[["user","alice"]]', None, 1024.0),
    ("User:b", '[["user","alice"]]', 1024.0, 2048.0),
    ("User:c", '[["user","alice"]]', 2048.0, None),
]


def test_sqlite_history_lists_every_change(tmp_path: Path) -> None:
    settings = StoreSettings(path=str(tmp_path / "store.db"))
    _changes(settings)
    assert _summary(settings) == EXPECTED


@pytest.mark.integration
def test_kafka_history_reads_every_record_not_the_fold(tansu: TansuBroker) -> None:
    settings = StoreSettings(
        backend=KAFKA, topic=f"_cfg-{uuid.uuid4().hex[:8]}", bootstrap=tansu.bootstrap
    )
    _changes(settings)
    assert _summary(settings) == EXPECTED


@pytest.mark.integration
def test_kafka_history_of_records_without_old_values(tansu: TansuBroker) -> None:
    """Records written before they carried ``old``, and tombstones: the old value comes
    from the record before, as the topic is read."""
    topic = f"_cfg-{uuid.uuid4().hex[:8]}"
    settings = StoreSettings(backend=KAFKA, topic=topic, bootstrap=tansu.bootstrap)
    open_quota_store(settings).close()  # creates the topic as the store does
    key = json.dumps(["client_quota", encode_entity(ALICE), "producer_byte_rate"]).encode()
    producer = Producer({"bootstrap.servers": tansu.bootstrap})
    for value in (
        {"v": 1, "value": 1024.0, "principal": "User:a", "source": "t", "ts_ms": 1},
        {"v": 1, "value": 2048.0, "principal": "User:b", "source": "t", "ts_ms": 2},
        None,
    ):
        producer.produce(topic, key=key, value=None if value is None else json.dumps(value))
        # One record per batch, as the store writes: tansu's high watermark counts a batch
        # of several records as one, and the reader stops at it.
        assert producer.flush(10) == 0
    assert _summary(settings) == [
        ("User:a", '[["user","alice"]]', None, 1024.0),
        ("User:b", '[["user","alice"]]', 1024.0, 2048.0),
        ("", '[["user","alice"]]', 2048.0, None),
    ]
