"""A producer that keeps producing through a gateway while a test does something hostile."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


class SteadyProducer:
    """Produces continuously in a thread through the gateway; counts acknowledgements."""

    def __init__(self, bootstrap: str) -> None:
        self.topic = f"steady-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(self.topic, 1, 1)]).values():
            future.result(30)
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 2, "message.timeout.ms": 30000}
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.acked = 0
        self.errors: list[Any] = []

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err:
            self.errors.append(err)
        else:
            self.acked += 1

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            self._producer.produce(
                self.topic, value=f"{sequence}".encode(), on_delivery=self._on_delivery
            )
            sequence += 1
            self._producer.poll(0.005)
        self._producer.flush(30)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)
