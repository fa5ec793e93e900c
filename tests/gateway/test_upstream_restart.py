"""The upstream broker dies and comes back while clients keep running.

tansu keeps data in memory, so the restarted broker is empty and the test recreates the
topic. The gateway must close clients whose upstream is gone (so they retry), reconnect with
KIP-580 backoff, and every message acknowledged after recovery must be consumed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway

pytestmark = pytest.mark.integration

TOPIC = "survivor"
BATCH = 500


def _create_topic(admin: AdminClient) -> bool:
    try:
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
    except KafkaException as exc:
        return "TOPIC_ALREADY_EXISTS" in str(exc)
    return True


def test_clients_survive_an_upstream_restart(
    start_tansu: Callable[[], TansuBroker],
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    broker = start_tansu()
    gateway = start_gateway(broker.bootstrap)
    bootstrap = str(gateway.bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for(lambda: _create_topic(admin), 30, "topic creation")

    acked: list[bytes] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err else acked.append(msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            # The test recreates the topic with one partition after the restart; a producer's
            # metadata request may otherwise have tansu auto-create it first with four, and
            # the consumer reads partition 0 only (a full-suite run lost the race).
            "allow.auto.create.topics": False,
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    consumed: list[bytes] = []

    def consume_until(expected: set[bytes]) -> Callable[[], bool]:
        def done() -> bool:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    consumed.append(message.value())
            return expected <= set(consumed)

        return done

    def produce(prefix: str) -> set[bytes]:
        values = {f"{prefix}-{i}".encode() for i in range(BATCH)}
        for value in sorted(values):
            producer.produce(TOPIC, value=value, on_delivery=on_delivery)
            producer.poll(0)
        return values

    try:
        before = produce("before")
        assert producer.flush(60) == 0
        wait_for(consume_until(before), 60, "messages produced before the restart")

        broker.stop()
        wait_for(lambda: "upstream connection lost" in caplog.text, 30, "the gateway to notice")
        # Drive the clients while the broker is down so they reconnect through the gateway,
        # which keeps failing upstream and backing off.
        wait_for(
            lambda: (
                "event=upstream_connect_failed" in caplog.text or consumer.consume(10, 0.2) is None
            ),
            30,
            "reconnect attempts",
        )
        broker.start()
        wait_for(lambda: _create_topic(admin), 60, "topic recreation after restart")

        # The recreated topic starts again at offset 0 while the consumer sits at 500: a data
        # loss no client can detect by itself, so rewind the same consumer instance.
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        acked.clear()
        errors.clear()
        after = produce("after")
        wait_for(lambda: producer.flush(1) == 0, 120, "acks after recovery")
        acknowledged = set(acked) & after
        assert acknowledged, f"nothing acknowledged after recovery; errors: {errors[:3]}"
        wait_for(consume_until(acknowledged), 120, "acknowledged messages to be consumed")
    finally:
        consumer.close()

    pattern = r"event=upstream_connect_failed.*retry_in_ms=(\d+)"
    backoffs = [int(m) for m in re.findall(pattern, caplog.text)]
    assert backoffs, "the gateway never retried its upstream connection"
    assert min(backoffs) >= 40  # reconnect.backoff.ms=50 with 20 % jitter
    assert max(backoffs) <= 1000  # reconnect.backoff.max.ms
