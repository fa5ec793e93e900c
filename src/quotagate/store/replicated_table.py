"""A key → value table kept in a compacted topic of the upstream cluster.

Every process that opens the table reads the topic from its beginning to its end before
``open`` returns, then follows it: the table is the fold of every record in offset order, so
all readers agree once they have read the same offset, last write wins, and nothing depends
on the upstream having compacted anything (an old value is simply overwritten by a later one
as the topic is read). A record with a null value removes its key.

Keys and values are JSON; a key is a list of strings (``["client_quota", entity, key]``), a
value an object carrying ``v`` (format version). Records this version cannot read are logged
and skipped, never applied.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from quotagate.fleet.topic_log import TopicLog
from quotagate.logs import kv

log = logging.getLogger(__name__)

FORMAT_VERSION: Final = 1
Key = tuple[str, ...]
OnRecord = Callable[[Key, "dict[str, Any] | None"], None]


class ReplicatedTable:
    def __init__(self, topic_log: TopicLog) -> None:
        self._log = topic_log
        self._rows: dict[Key, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.version = 0
        """Counts the records applied: changes whenever the table may have changed."""
        self.skipped = 0
        self._watchers: list[Callable[[], None]] = []
        self._observers: list[OnRecord] = []

    @classmethod
    def open(
        cls,
        bootstrap: str,
        topic: str,
        *,
        replication_factor: int = -1,
        client_id: str,
        client_config: Mapping[str, str] | None = None,
        on_record: OnRecord | None = None,
    ) -> ReplicatedTable:
        """Create the topic if missing (compacted, one partition) and read it to its end.

        ``on_record`` sees every record read from the topic, in offset order, before it is
        folded in: the fold keeps only the last value of a key, a history needs them all.
        """
        table = cls(
            TopicLog(
                bootstrap,
                topic,
                topic_config={"cleanup.policy": "compact"},
                replication_factor=replication_factor,
                client_id=client_id,
                client_config=client_config,
            )
        )
        if on_record is not None:
            table._observers.append(on_record)
        table._log.start_in_thread(table._apply)
        return table

    def close(self) -> None:
        self._log.close_in_thread()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the table's thread) after every record applied."""
        self._watchers.append(callback)

    # -- reading ---------------------------------------------------------------------------

    def rows(self, kind: str) -> dict[Key, dict[str, Any]]:
        """The live rows whose key starts with ``kind``, key without it."""
        with self._lock:
            return {key[1:]: dict(value) for key, value in self._rows.items() if key[0] == kind}

    def get(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            value = self._rows.get(key)
            return None if value is None else dict(value)

    # -- writing ---------------------------------------------------------------------------

    def put(self, key: Key, value: dict[str, Any] | None) -> None:
        """Write through the topic (acknowledged before return), and apply at once here: the
        topic's order decides for every reader, this process included, once read back."""
        encoded_key = json.dumps(list(key), separators=(",", ":")).encode()
        encoded = (
            None
            if value is None
            else json.dumps({"v": FORMAT_VERSION, **value}, separators=(",", ":")).encode()
        )
        self._log.append_and_wait(encoded_key, encoded)
        self._store(key, value)

    # -- the log's thread --------------------------------------------------------------------

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None) -> None:
        try:
            key = _decode_key(raw_key)
            value = None if raw_value is None else _decode_value(raw_value)
        except ValueError as exc:
            self.skipped += 1
            log.warning(kv("store_record_skipped", topic=self._log.topic, error=exc))
            return
        for observer in self._observers:
            observer(key, None if value is None else dict(value))
        self._store(key, value)

    def _store(self, key: Key, value: dict[str, Any] | None) -> None:
        with self._lock:
            if value is None:
                self._rows.pop(key, None)
            else:
                self._rows[key] = value
            self.version += 1
        for watcher in self._watchers:
            watcher()


def _decode_key(raw: bytes | None) -> Key:
    if raw is None:
        raise ValueError("record without a key")
    key = json.loads(raw)
    if not isinstance(key, list) or not key or not all(isinstance(p, str) for p in key):
        raise ValueError(f"key {raw[:80]!r} is not a list of strings")
    return tuple(key)


def _decode_value(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict) or value.get("v") != FORMAT_VERSION:
        raise ValueError(f"value {raw[:80]!r} is not a version {FORMAT_VERSION} object")
    value.pop("v")
    return value
