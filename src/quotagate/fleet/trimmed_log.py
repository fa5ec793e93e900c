"""The usage exchange's log as one topic, trimmed with ``DeleteRecords`` (Kafka).

The rolled log (rolling_log) exists because following a long topic costs tansu more and more
and tansu does not answer ``DeleteRecords``. Kafka does: there the fleet can keep one topic
and trim it, so that every worker follows one partition, nothing is created or deleted while
it runs, and no librdkafka assignment ever points at a deleted topic. Once a period
(``usage.roll.ms``) a worker deletes the records older than two periods: a catching-up worker
reads one quota window back, and a period is at least that long; a peer whose clock is up to
a period behind still finds what it reads. The topic's ``retention.ms`` stays as the
backstop for a fleet that stopped trimming.

Which log a fleet uses is ``[fleet] usage.trim``, and every member of a fleet must name the
same one (they follow different topics otherwise): the setting is the fleet's, like its id.
A start against an upstream that does not answer ``DeleteRecords`` fails with the reason,
rather than quietly growing one topic.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from quotagate.fleet.rolling_log import Clock, wall_ms
from quotagate.fleet.topic_log import NOT_YET_KNOWN, OnRecord, TopicLog, TopicLogError
from quotagate.logs import kv

log = logging.getLogger(__name__)

# Exported at run time, but missing from the package's type information.
OffsetSpec: Any = importlib.import_module("confluent_kafka.admin").OffsetSpec

_TIMEOUT_S: Final = 30.0
_PROBE_TIMEOUT_S: Final = 10.0
# Beside what topic_log waits out for a topic its brokers have not all learned of yet, what
# DeleteRecords answers then; a transport failure is an answer (tansu closes the connection).
_NOT_YET_LED: Final = NOT_YET_KNOWN | {
    KafkaError._NOENT,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
}


class TrimmedTopicLog(TopicLog):
    """A report log on one topic, its records older than two periods of ``period_ms``
    deleted once a period."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        period_ms: int,
        topic_config: Mapping[str, str],
        replication_factor: int = -1,
        client_id: str = "quotagate",
        client_config: Mapping[str, str] | None = None,
        clock: Clock = wall_ms,
    ) -> None:
        if period_ms < 1:
            raise ValueError("period_ms must be positive")
        super().__init__(
            bootstrap_servers,
            topic,
            topic_config=topic_config,
            replication_factor=replication_factor,
            client_id=client_id,
            client_config=client_config,
        )
        self.period_ms = period_ms
        self._clock = clock
        self._admin: Any = None
        self._trimmer: threading.Thread | None = None
        self._trim_stop = threading.Event()
        self.trimmed_to = 0
        """The offset before which this worker last deleted the topic's records (metrics)."""

    def start_in_thread(self, on_record: OnRecord, from_timestamp_ms: int | None = None) -> None:
        self._ensure_topic()
        self._admin = AdminClient(self._common_config())
        # Before following: an upstream without DeleteRecords is a wrong setting, said now.
        self._delete_before(0, _PROBE_TIMEOUT_S)
        super().start_in_thread(on_record, from_timestamp_ms)
        self._trim_stop.clear()
        self._trimmer = threading.Thread(
            target=self._trim_each_period, name=f"trimmed-log-{self.topic}", daemon=True
        )
        self._trimmer.start()

    def close_in_thread(self) -> None:
        self._trim_stop.set()
        if self._trimmer is not None:
            self._trimmer.join(5.0)
            self._trimmer = None
        super().close_in_thread()
        self._admin = None

    def trim(self) -> int:
        """Delete the records written more than two periods ago; the new start offset."""
        found = self._offset(OffsetSpec.for_timestamp(self._clock() - 2 * self.period_ms))
        if found < 0:
            # Nothing that recent: every record is older (a fleet quiet for two periods).
            # One appended between the two questions may go too; reports are cumulative.
            found = self._offset(OffsetSpec.latest())
        if found <= self.trimmed_to:
            return self.trimmed_to
        self._delete_before(found, _TIMEOUT_S)
        self.trimmed_to = found
        log.info(kv("topic_trimmed", topic=self.topic, before_offset=found))
        return found

    def _offset(self, spec: Any) -> int:
        # The admin client's own request: the consumer belongs to the following thread.
        partition = TopicPartition(self.topic, 0)
        futures = self._admin.list_offsets({partition: spec}, request_timeout=_TIMEOUT_S)
        return int(futures[partition].result(_TIMEOUT_S).offset)

    def _delete_before(self, offset: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._delete_records(offset, max(deadline - time.monotonic(), 1.0))
                return
            except Exception as exc:  # confluent-kafka raises KafkaException wrapping the error
                error = exc.args[0] if exc.args else None
                code = error.code() if isinstance(error, KafkaError) else None
                if code in _NOT_YET_LED and time.monotonic() < deadline:
                    time.sleep(0.1)  # a topic just created: its leader is not known yet
                    continue
                raise TopicLogError(
                    f"cannot trim topic {self.topic} with DeleteRecords ({exc}): the upstream "
                    'must answer it (Kafka does, tansu does not); set [fleet] usage.trim = "roll"'
                    " on every member of the fleet to roll the usage topic instead"
                ) from None

    def _delete_records(self, offset: int, timeout_s: float) -> None:
        partition = TopicPartition(self.topic, 0, offset)
        futures = self._admin.delete_records(
            [partition], request_timeout=timeout_s, operation_timeout=timeout_s
        )
        for future in futures.values():
            future.result(timeout_s)

    def _trim_each_period(self) -> None:
        while not self._trim_stop.wait(self.period_ms / 1000):
            try:
                self.trim()
            except Exception as exc:  # the next period tries again; retention is the backstop
                log.warning(kv("topic_trim_failed", topic=self.topic, error=exc))
