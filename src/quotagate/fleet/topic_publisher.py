"""Rows published to one Kafka topic from the event loop without ever blocking it.

What the Kafka usage sink is built on (``[usage] sink = "kafka"``). The event loop appends
rows to a batch and hands a full batch (or, at :meth:`TopicPublisher.flush`, a partial one)
to a bounded queue (:class:`quotagate.usage.handover.BatchHandOver`); a thread of its own
encodes each row into a (key, value) record and gives it to librdkafka, whose producer
batches, compresses and retries. Memory is bounded twice: by the queue (``queue_size`` rows)
and by librdkafka's own queue (the same number of records). When either is full, because the
topic is slow or the cluster is gone, rows are dropped, counted (``dropped``) and logged at
most once every few seconds; records librdkafka gives up on after ``message.timeout.ms`` are
counted and logged the same way. Requests are never held back for a usage event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from quotagate.logs import kv
from quotagate.usage.handover import BatchHandOver

log = logging.getLogger(__name__)
_LIBRDKAFKA_LOG = logging.getLogger(f"{__name__}.librdkafka")

Row = tuple[Any, ...]
Encode = Callable[[Row], tuple[bytes, bytes]]

_DROP_LOG_INTERVAL_S: Final = 5.0
_ADMIN_TIMEOUT_S: Final = 10.0
# Throughput over latency (the stream job reads in triggers of seconds), and a bound on how
# long a record may wait for a cluster that is gone before it counts as dropped.
_PRODUCER_TUNING: Final = {
    "linger.ms": 50,
    "compression.type": "lz4",
    "acks": "all",
    "enable.idempotence": False,
    "message.timeout.ms": 30_000,
}


class TopicPublisher:
    """``add``/``flush`` from one thread (the event loop); ``close`` once, after the last
    ``add``, from any thread (it may wait up to ``close_timeout_s`` for the cluster)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        encode: Encode,
        *,
        client_config: Mapping[str, str] | None = None,
        client_id: str = "quotagate-usage",
        partitions: int = 6,
        replication_factor: int = -1,
        queue_size: int = 200_000,
        close_timeout_s: float = 10.0,
        create_topic: bool = True,
    ) -> None:
        """``client_config``: librdkafka security properties (``UpstreamSecurity``'s);
        ``create_topic``: create the topic (``partitions``) when it is missing."""
        self.topic = topic
        self._encode = encode
        self._config: dict[str, Any] = {
            **dict(client_config or {}),
            "bootstrap.servers": bootstrap_servers,
            "client.id": client_id,
            "logger": _LIBRDKAFKA_LOG,
        }
        self._partitions = partitions
        self._replication_factor = replication_factor
        self._queue_size = queue_size
        self._close_timeout_s = close_timeout_s
        self._create = create_topic
        self._rows: BatchHandOver[Row] = BatchHandOver(queue_size)
        self._lock = threading.Lock()  # dropped is counted by both threads
        self._dropped = 0
        self.written = 0
        """Records the cluster acknowledged."""
        self._last_drop_log = 0.0
        self._thread = threading.Thread(target=self._run, name="quotagate-usage-kafka", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        return self._dropped

    @property
    def pending_rows(self) -> int:
        """Rows taken and not yet with librdkafka (at most ``queue_size``)."""
        return self._rows.pending

    # -- event loop side -------------------------------------------------------------------

    def add(self, row: Row) -> bool:
        """Take one row; False (and counted) when the publisher is that far behind."""
        if self._rows.add(row):
            return True
        self._drop(1, "closed" if self._rows.closed else "queue_full")
        return False

    def flush(self) -> None:
        """Hand the rows taken so far to the thread; a no-op while it is behind."""
        self._rows.flush()

    def close(self) -> None:
        if self._rows.close():
            self._thread.join(2 * _ADMIN_TIMEOUT_S + self._close_timeout_s + 5.0)

    # -- publishing thread -----------------------------------------------------------------

    def _run(self) -> None:
        if self._create:
            self._create_topic()
        producer = Producer(
            {
                **self._config,
                **_PRODUCER_TUNING,
                "queue.buffering.max.messages": self._queue_size,
            }
        )
        while (rows := self._rows.take(0.1)) is not None:
            if rows:
                self._publish(producer, rows)
            producer.poll(0)
        if producer.flush(self._close_timeout_s):
            # What the cluster never took is purged, and counted by its delivery reports.
            producer.purge()
            producer.flush(0)

    def _publish(self, producer: Any, rows: list[Row]) -> None:
        produce = producer.produce
        topic = self.topic
        delivered = self._delivered
        for index, row in enumerate(rows):
            try:
                key, value = self._encode(row)
                produce(topic, value, key, on_delivery=delivered)
            except BufferError:
                # librdkafka's queue is full: the cluster is slow or gone. What is left of
                # this batch goes too; waiting here would only fill the queue behind us.
                self._drop(len(rows) - index, "producer_queue_full")
                return
            except Exception as exc:  # a row that cannot be encoded must not stop the rest
                self._drop(1, f"unencodable:{type(exc).__name__}")

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is None:
            self.written += 1
        else:
            self._drop(1, f"delivery_failed:{error.name()}")

    def _drop(self, count: int, reason: str) -> None:
        with self._lock:
            self._dropped += count
            now = time.monotonic()
            if now - self._last_drop_log < _DROP_LOG_INTERVAL_S:
                return
            self._last_drop_log = now
            total = self._dropped
        log.warning(kv("usage_events_dropped", total=total, topic=self.topic, reason=reason))

    def _create_topic(self) -> None:
        """Create the topic if it is missing; on failure say why and carry on (the cluster may
        create it on first write, or come back later)."""
        admin = AdminClient(self._config)
        new = NewTopic(
            self.topic,
            num_partitions=self._partitions,
            replication_factor=self._replication_factor,
        )
        try:
            admin.create_topics([new], request_timeout=_ADMIN_TIMEOUT_S)[self.topic].result(
                _ADMIN_TIMEOUT_S
            )
            log.info(kv("topic_created", topic=self.topic, partitions=self._partitions))
        except Exception as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            log.warning(kv("usage_topic_not_created", topic=self.topic, error=str(exc)))
