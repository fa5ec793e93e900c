"""A confluent-kafka producer sending at a set rate, whatever the machine's load: its
throughput is a fact of the test, so a quota that must not change it (a shadow quota) can be
checked against it, and one that must (a live quota) is seen to."""

from __future__ import annotations

import threading
import time
from typing import Any, Final

from confluent_kafka import Producer

from quotagate.protocol import api_keys

VALUE: Final = b"s" * 4000


class PacedProducer(threading.Thread):
    """Produces ``records_per_s`` records of :data:`VALUE` a second, on schedule, until
    :attr:`stop` is set; when the gateway throttles it, its bounded queue fills and the
    schedule runs ahead."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, records_per_s: int) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_id = client_id
        self.records_per_s = records_per_s
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_id,
                "linger.ms": 5,
                "batch.size": 16384,
                # Two seconds of the schedule: enough to ride out a stall of the machine,
                # and the backlog a throttle leaves (delivered at the quota by the flush
                # at the end) stays two seconds of records, not all those held since.
                "queue.buffering.max.messages": 2 * self.records_per_s,
            }
        )

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                self.errors.append(str(error))

        start = time.monotonic()
        sent = 0
        while not self.stop.is_set():
            due = int((time.monotonic() - start) * self.records_per_s)
            while sent < due:
                try:
                    producer.produce(self.topic, VALUE, on_delivery=delivered)
                except BufferError:
                    break  # throttled: the queue stays bounded
                sent += 1
            producer.poll(0.005)
        producer.flush(30)


def wire_rate(rows: list[dict[str, Any]], client_id: str, start: float, end: float) -> float:
    """Produce request bytes per second of ``client_id`` in the usage events, [start, end)."""
    sent = sum(
        r["request_bytes"]
        for r in rows
        if r["client_id"] == client_id
        and r["api_key"] == api_keys.PRODUCE
        and start <= r["ts_ms"] / 1000 < end
    )
    return sent / (end - start)
