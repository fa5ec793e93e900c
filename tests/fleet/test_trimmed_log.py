"""``[fleet] usage.trim = "delete-records"``: the usage exchange's one topic, trimmed with
Kafka's DeleteRecords (fleet/trimmed_log.py), and refused with the reason where the upstream
does not answer it (tansu)."""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from quotagate.fleet.topic_log import TopicLogError
from quotagate.fleet.trimmed_log import TrimmedTopicLog
from quotagate.gateway.embedded import TansuBroker
from support.upstreams import Upstream

pytestmark = pytest.mark.integration

PERIOD_MS = 600_000
"""Long enough that the log's own trimmer never runs here: the test calls ``trim``."""


class Received:
    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.changed = threading.Condition()

    def __call__(self, _key: bytes | None, value: bytes | None) -> None:
        with self.changed:
            self.values.append(value or b"")
            self.changed.notify_all()

    def wait_for(self, count: int) -> list[bytes]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.values) >= count, 30), self.values
            return list(self.values)


def _log(bootstrap: str, topic: str, clock_ms: list[int]) -> TrimmedTopicLog:
    return TrimmedTopicLog(
        bootstrap,
        topic,
        period_ms=PERIOD_MS,
        topic_config={"cleanup.policy": "delete"},
        client_id=f"trim-{uuid.uuid4().hex[:6]}",
        clock=lambda: clock_ms[0],
    )


def _low_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "trim-watch"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        return int(low)
    finally:
        consumer.close()


def test_records_two_periods_old_are_deleted_and_newer_ones_kept(upstream_kafka: Upstream) -> None:
    topic = f"_quotagate.trim-{uuid.uuid4().hex[:8]}.usage"
    clock_ms = [time.time_ns() // 1_000_000]
    received = Received()
    log = _log(upstream_kafka.bootstrap, topic, clock_ms)
    log.start_in_thread(received)
    try:
        for n in range(5):
            log.append(b"member", f"old-{n}".encode())
        received.wait_for(5)
        assert log.trim() == 0, "nothing is two periods old yet"

        # Two periods and a little later, those five are past; two new reports are not.
        clock_ms[0] = time.time_ns() // 1_000_000 + 2 * PERIOD_MS + 1000
        assert log.trim() == 5
        assert _low_watermark(upstream_kafka.bootstrap, topic) == 5
        time.sleep(0.01)  # the new reports' timestamps come after the trim point
        for n in range(2):
            log.append(b"member", f"new-{n}".encode())
        received.wait_for(7)
        clock_ms[0] = time.time_ns() // 1_000_000 + PERIOD_MS
        assert log.trim() == 5, "reports less than two periods old stay"
    finally:
        log.close_in_thread()

    # A worker starting now reads from the trimmed start: only what was kept.
    late = Received()
    reader = _log(upstream_kafka.bootstrap, topic, clock_ms)
    reader.start_in_thread(late, from_timestamp_ms=0)
    try:
        assert late.wait_for(2) == [b"new-0", b"new-1"]
    finally:
        reader.close_in_thread()


def test_an_upstream_without_delete_records_is_told_to_roll(tansu: TansuBroker) -> None:
    log = _log(tansu.bootstrap, f"_quotagate.trim-{uuid.uuid4().hex[:8]}.usage", [0])
    with pytest.raises(TopicLogError, match=re.escape('set [fleet] usage.trim = "roll"')):
        log.start_in_thread(Received())
