"""One single-partition topic on the upstream cluster, appended to and followed.

The fleet keeps its shared state in such topics (usage reports; configuration). A
``TopicLog`` makes sure the topic exists, reads it from a start point to its end before
``start`` returns, then keeps following it; every record reaches ``on_record`` on the
asyncio event loop, in offset order. Appends are fire-and-forget with the producer's own
retries; a failed append is logged (the next report carries cumulative values anyway).

Built on confluent-kafka (librdkafka): its producer and consumer run their own threads; one
more thread here polls both, so nothing on the event loop ever blocks on the network.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from quotagate.logs import kv

log = logging.getLogger(__name__)
# librdkafka's own lines (connects, disconnects) go through logging, not to stderr.
_LIBRDKAFKA_LOG = logging.getLogger(f"{__name__}.librdkafka")

OnRecord = Callable[[bytes | None, bytes | None], None]

_POLL_S: Final = 0.02
_TIMEOUT_S: Final = 30.0
_CONNECT_TIMEOUT_S: Final = 5.0
# Low latency over throughput: reports are small and their age is the fleet's overshoot.
_CONSUMER_TUNING: Final = {
    "fetch.wait.max.ms": 10,
    "fetch.min.bytes": 1,
    "fetch.error.backoff.ms": 50,
    "enable.auto.commit": False,
    "enable.partition.eof": True,
}
# Not idempotent: its InitProducerId costs about a second at start, and a duplicated report
# adds nothing anyway (receivers subtract cumulative values they have seen).
_PRODUCER_TUNING: Final = {"linger.ms": 0, "acks": "all"}


class TopicLogError(RuntimeError):
    """The topic could not be created, or not read to its end in time."""


class TopicLog:
    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        topic_config: Mapping[str, str],
        replication_factor: int = -1,
        client_id: str = "quotagate",
        client_config: Mapping[str, str] | None = None,
    ) -> None:
        """``client_config``: extra librdkafka properties for every client of this log (the
        upstream's security.protocol, ssl.*, sasl.*)."""
        self.topic = topic
        self._bootstrap = bootstrap_servers
        self._topic_config = dict(topic_config)
        self._replication_factor = replication_factor
        self._client_id = client_id
        self._client_config = dict(client_config or {})
        self._producer: Any = None
        self._consumer: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.append_failures = 0

    async def start(self, on_record: OnRecord, from_timestamp_ms: int | None = None) -> None:
        """Create the topic if missing, read it to its end from ``from_timestamp_ms``
        (None: from the beginning), then follow it in the background; ``on_record`` runs on
        the calling event loop."""
        loop = asyncio.get_running_loop()

        def deliver(key: bytes | None, value: bytes | None) -> None:
            loop.call_soon_threadsafe(on_record, key, value)

        await loop.run_in_executor(None, self.start_in_thread, deliver, from_timestamp_ms)

    def start_in_thread(self, on_record: OnRecord, from_timestamp_ms: int | None = None) -> None:
        """As :meth:`start`, blocking until caught up; ``on_record`` runs on the log's own
        thread (callers that are not on an event loop: the store)."""
        self._ensure_topic()
        self._open_clients()
        start, end = self._bounds(from_timestamp_ms)
        self._consumer.assign([TopicPartition(self.topic, 0, start)])
        caught_up = threading.Event()
        self._thread = threading.Thread(
            target=self._follow,
            args=(on_record, caught_up, start, end),
            name=f"topic-log-{self.topic}",
            daemon=True,
        )
        self._thread.start()
        if not caught_up.wait(_TIMEOUT_S):
            self.close_in_thread()
            raise TopicLogError(
                f"could not read topic {self.topic} to its end within {_TIMEOUT_S:.0f} s"
            )

    def append_and_wait(
        self, key: bytes, value: bytes | None, timeout_s: float = _TIMEOUT_S
    ) -> None:
        """Append and block until the upstream acknowledged it (raises ``TopicLogError``)."""
        acked = threading.Event()
        failure: list[Any] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failure.append(error)
            acked.set()

        self._producer.produce(self.topic, value=value, key=key, on_delivery=delivered)
        deadline = time.monotonic() + timeout_s
        while not acked.is_set():
            if time.monotonic() > deadline:
                raise TopicLogError(f"no acknowledgement from {self.topic} in {timeout_s:.0f} s")
            self._producer.poll(0.01)
        if failure:
            raise TopicLogError(f"cannot write to {self.topic}: {failure[0]}")

    def append(self, key: bytes, value: bytes, topic: str | None = None) -> None:
        """Append without waiting (to ``topic`` instead of this log's own, if named)."""
        try:
            self._producer.produce(
                topic or self.topic, value=value, key=key, on_delivery=self._delivered
            )
        except BufferError:
            self.append_failures += 1
            log.warning(kv("topic_log_append_dropped", topic=self.topic, reason="queue full"))

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close_in_thread)

    def close_in_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.flush(5.0)
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()

    # -- worker-thread side ----------------------------------------------------------------

    def _open_clients(self) -> None:
        common = self._common_config()
        self._producer = Producer({**common, **_PRODUCER_TUNING})
        self._consumer = Consumer({**common, **_CONSUMER_TUNING, "group.id": self._client_id})

    def _common_config(self) -> dict[str, Any]:
        return {
            **self._client_config,
            "bootstrap.servers": self._bootstrap,
            "client.id": self._client_id,
            "logger": _LIBRDKAFKA_LOG,
        }

    def _check_reachable(self) -> None:
        """Fail in seconds, with the reason, when no bootstrap server answers at all
        (librdkafka would retry quietly until the 30 s timeout)."""
        reasons = []
        for address in self._bootstrap.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S).close()
                return
            except (OSError, ValueError) as exc:
                reasons.append(f"{address.strip()}: {exc}")
        raise TopicLogError(f"cannot reach the upstream ({'; '.join(reasons)})")

    def _ensure_topic(self) -> None:
        self._check_reachable()
        self._create_topic(AdminClient(self._common_config()), self.topic)

    def _create_topic(self, admin: Any, topic: str) -> None:
        """Create ``topic`` with this log's settings; one that exists already is fine."""
        new = NewTopic(
            topic,
            num_partitions=1,
            replication_factor=self._replication_factor,
            config=self._topic_config,
        )
        future = admin.create_topics([new], request_timeout=_TIMEOUT_S)[topic]
        try:
            future.result(_TIMEOUT_S)
            log.info(kv("topic_created", topic=topic, config=self._topic_config))
        except Exception as exc:  # confluent-kafka raises KafkaException wrapping the error
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise TopicLogError(f"cannot create topic {topic}: {exc}") from None

    def _bounds(self, from_timestamp_ms: int | None) -> tuple[int, int]:
        """(first offset to read, offset of the end at start)."""
        partition = TopicPartition(self.topic, 0)
        try:
            low, high = watermark_offsets(self._consumer, partition, _TIMEOUT_S)
        except Exception as exc:
            raise TopicLogError(f"cannot read the offsets of {self.topic}: {exc}") from None
        if from_timestamp_ms is None:
            return low, high
        wanted = TopicPartition(self.topic, 0, from_timestamp_ms)
        found = self._consumer.offsets_for_times([wanted], timeout=_TIMEOUT_S)[0].offset
        # -1: nothing at or after that time, so only what comes next.
        return (high if found < 0 else found), high

    def _follow(self, deliver: OnRecord, caught_up: threading.Event, start: int, end: int) -> None:
        consumer, producer = self._consumer, self._producer
        if start >= end:
            caught_up.set()
        while not self._stop.is_set():
            producer.poll(0)
            message = consumer.poll(_POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    caught_up.set()
                else:
                    log.warning(kv("topic_log_read_error", topic=self.topic, error=error))
                continue
            try:
                deliver(message.key(), message.value())
            except Exception:
                log.exception(kv("topic_log_record_failed", topic=self.topic))
            if message.offset() + 1 >= end:
                caught_up.set()

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is not None:
            self.append_failures += 1
            log.warning(kv("topic_log_append_failed", topic=self.topic, error=error))


# A topic just created is not known to every broker at once: Kafka's brokers learn of it from
# the metadata log a moment later (tansu knows it at once), and until then the leader answers
# UNKNOWN_TOPIC_OR_PARTITION, which librdkafka reports as an unknown partition.
NOT_YET_KNOWN: Final = frozenset(
    {KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}
)


def watermark_offsets(consumer: Consumer, partition: TopicPartition, timeout_s: float) -> Any:
    """``(low, high)`` of ``partition``, asked again while the brokers do not know it yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(
                partition, timeout=max(deadline - time.monotonic(), 0.1)
            )
        except Exception as exc:  # confluent-kafka raises KafkaException wrapping the error
            error = exc.args[0] if exc.args else None
            known = not (isinstance(error, KafkaError) and error.code() in NOT_YET_KNOWN)
            if known or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
