"""The usage exchange's log: one topic per period of time, so following it stays cheap.

Following the end of a topic should cost the same however long the topic is, but on the
embedded tansu it does not: four followers of a topic that four writers append ten reports a
second to took the broker from 11 % to 19 % of a core in 80 s, and moving to a new topic (the
old one deleted) brought it back to 11 % at once (BENCHMARKS.md, "Fleet exchange"). On Kafka,
``DeleteRecords`` could trim one topic instead; tansu does not answer it. Rolling works on
both: the reports of the period that starts at ``S`` (epoch seconds) go to ``<base>.<S>``;
every worker follows the period before, the current one and the next (so clocks a little
apart still meet), creates the next one before it begins, and deletes the ones before that.
At most five short topics exist at any time.

Records of two periods may be read out of order around the change of period; the ledger
ignores a report older than the newest it has absorbed from the same sender (fleet_ledger).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from quotagate.fleet.topic_log import OnRecord, TopicLog, TopicLogError, watermark_offsets
from quotagate.logs import kv

log = logging.getLogger(__name__)

Clock = Callable[[], int]
"""Epoch milliseconds."""

_TIMEOUT_S: Final = 30.0
_POLL_S: Final = 0.02
_HOUSEKEEPING_S: Final = 1.0


def period_start_s(now_ms: int, roll_ms: int) -> int:
    """The start (epoch seconds) of the period ``now_ms`` falls in."""
    return now_ms // roll_ms * roll_ms // 1000


def period_topic(base: str, start_s: int) -> str:
    return f"{base}.{start_s}"


def period_of(base: str, topic: str) -> int | None:
    """The period start a topic of this log is named for; None for any other topic."""
    head, dot, tail = topic.rpartition(".")
    return int(tail) if dot and head == base and tail.isdigit() else None


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class RollingTopicLog(TopicLog):
    """A report log over the topics ``<base>.<period start>``, one period of ``roll_ms``
    each (a whole number of seconds)."""

    def __init__(
        self,
        bootstrap_servers: str,
        base: str,
        *,
        roll_ms: int,
        topic_config: Mapping[str, str],
        replication_factor: int = -1,
        client_id: str = "quotagate",
        client_config: Mapping[str, str] | None = None,
        clock: Clock = wall_ms,
    ) -> None:
        if roll_ms < 1000 or roll_ms % 1000:
            raise ValueError("roll_ms must be a whole number of seconds")
        super().__init__(
            bootstrap_servers,
            period_topic(base, period_start_s(clock(), roll_ms)),
            topic_config=topic_config,
            replication_factor=replication_factor,
            client_id=client_id,
            client_config=client_config,
        )
        self.base = base
        self.roll_ms = roll_ms
        self._clock = clock
        self._admin: Any = None
        self._followed: set[str] = set()
        self._created: set[str] = set()
        self._swept_period = -1
        self.deleted = 0
        """Past period topics this worker deleted (metrics)."""

    def append(self, key: bytes, value: bytes, topic: str | None = None) -> None:
        now_topic = period_topic(self.base, period_start_s(self._clock(), self.roll_ms))
        super().append(key, value, topic or now_topic)

    def start_in_thread(self, on_record: OnRecord, from_timestamp_ms: int | None = None) -> None:
        self._check_reachable()
        self._admin = AdminClient(self._common_config())
        now = self._clock()
        self._maintain(now)
        self._open_clients()
        since = now if from_timestamp_ms is None else from_timestamp_ms
        ends = self._assign_from(since, now)
        caught_up = threading.Event()
        self._thread = threading.Thread(
            target=self._follow_periods,
            args=(on_record, caught_up, ends),
            name=f"rolling-log-{self.base}",
            daemon=True,
        )
        self._thread.start()
        if not caught_up.wait(_TIMEOUT_S):
            self.close_in_thread()
            raise TopicLogError(
                f"could not read {self.base}.* to its end within {_TIMEOUT_S:.0f} s"
            )

    def close_in_thread(self) -> None:
        super().close_in_thread()
        # Released with the other clients: an admin client kept by a closed log holds its
        # connections open, and an upstream shutting down waits for them (tansu: 5 s).
        self._admin = None

    # -- the log's own thread ------------------------------------------------------------

    def _assign_from(self, since_ms: int, now_ms: int) -> dict[str, int]:
        """Follow every period from the one ``since_ms`` falls in, each from ``since_ms``;
        return the end offset of each at start (what must be read before serving)."""
        consumer = self._consumer
        step = self.roll_ms // 1000
        first = period_start_s(since_ms, self.roll_ms)
        periods = {
            period_topic(self.base, s)
            for s in range(first, period_start_s(now_ms, self.roll_ms) + 1, step)
        }
        assignments, ends = [], {}
        for topic in sorted((periods | self._wanted(now_ms)) & self._created):
            partition = TopicPartition(topic, 0)
            low, high = watermark_offsets(consumer, partition, _TIMEOUT_S)
            wanted = TopicPartition(topic, 0, since_ms)
            found = consumer.offsets_for_times([wanted], timeout=_TIMEOUT_S)[0].offset
            start = high if found < 0 else max(found, low)
            assignments.append(TopicPartition(topic, 0, start))
            if start < high:
                ends[topic] = high
            self._followed.add(topic)
        consumer.assign(assignments)
        return ends

    def _follow_periods(
        self, deliver: OnRecord, caught_up: threading.Event, ends: dict[str, int]
    ) -> None:
        consumer, producer = self._consumer, self._producer
        if not ends:
            caught_up.set()
        next_housekeeping = time.monotonic() + _HOUSEKEEPING_S
        while not self._stop.is_set():
            producer.poll(0)
            if time.monotonic() >= next_housekeeping:
                next_housekeeping = time.monotonic() + _HOUSEKEEPING_S
                self._housekeep()
            message = consumer.poll(_POLL_S)
            if message is None:
                continue
            topic = message.topic()
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ends.pop(topic, None)
                elif error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    # A period topic just deleted by a peer is expected; anything else is not.
                    log.warning(kv("topic_log_read_error", topic=topic, error=error))
            else:
                try:
                    deliver(message.key(), message.value())
                except Exception:
                    log.exception(kv("topic_log_record_failed", topic=topic))
                if topic in ends and message.offset() + 1 >= ends[topic]:
                    del ends[topic]
            if not ends:
                caught_up.set()

    def _housekeep(self) -> None:
        """Create what is coming, follow what is wanted, drop and delete what is past."""
        try:
            now = self._clock()
            # Stop following before deleting anything: librdkafka 2.x crashes (a null topic
            # name in its metadata cache) when a partition it is assigned is deleted.
            past = {t for t in self._followed if self._is_past(t, now)}
            if past:
                self._consumer.incremental_unassign([TopicPartition(t, 0) for t in sorted(past)])
                self._followed -= past
            self._maintain(now)
            new = (self._wanted(now) & self._created) - self._followed
            if new:
                self._consumer.incremental_assign(
                    [TopicPartition(t, 0, OFFSET_BEGINNING) for t in sorted(new)]
                )
                self._followed |= new
        except Exception:
            log.exception(kv("rolling_log_housekeeping_failed", base=self.base))

    def _maintain(self, now_ms: int) -> None:
        for topic in sorted(self._wanted(now_ms) - self._created):
            self._create_topic(self._admin, topic)
            self._created.add(topic)
        period = period_start_s(now_ms, self.roll_ms)
        if period != self._swept_period:
            self._swept_period = period
            self._delete_past(period)

    def _wanted(self, now_ms: int) -> set[str]:
        current = period_start_s(now_ms, self.roll_ms)
        step = self.roll_ms // 1000
        return {period_topic(self.base, current + k * step) for k in (-1, 0, 1)}

    def _is_past(self, topic: str, now_ms: int) -> bool:
        start = period_of(self.base, topic)
        previous = period_start_s(now_ms, self.roll_ms) - self.roll_ms // 1000
        return start is not None and start < previous

    def _delete_past(self, period_s: int) -> None:
        """Delete the topics of periods that ended two periods ago or earlier. Every worker
        stops following a period once the next but one has begun (a worker catching up reads
        one quota window back, less than a period); the extra period is for clocks that are
        up to a period apart, whose owners still follow it."""
        oldest_kept = period_s - 2 * (self.roll_ms // 1000)
        names = self._admin.list_topics(timeout=_TIMEOUT_S).topics
        past = [n for n in names if (s := period_of(self.base, n)) is not None and s < oldest_kept]
        if not past:
            return
        for topic, future in self._admin.delete_topics(past, request_timeout=_TIMEOUT_S).items():
            self._created.discard(topic)
            try:
                future.result(_TIMEOUT_S)
                self.deleted += 1
                log.info(kv("topic_deleted", topic=topic, reason="usage period over"))
            except Exception as exc:  # a KafkaException; a peer may have deleted it first
                error = exc.args[0] if exc.args else None
                gone = isinstance(error, KafkaError) and (
                    error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                )
                if not gone:
                    log.warning(kv("topic_delete_failed", topic=topic, error=exc))
