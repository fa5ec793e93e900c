"""Which store a process opens: the embedded SQLite file, or the upstream's config topic.

``[store] backend = "sqlite"`` (the default) keeps quotas, thresholds and credentials in one
file for one process. ``backend = "kafka"`` keeps them in a compacted topic of the upstream
cluster, so every worker and instance of a fleet reads and writes the same configuration.

The Kafka stores are imported in the branch that chooses them: they stand on librdkafka
(``fleet.topic_log``), which a process on the SQLite store, or one that only reads its
config, never loads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar

from quotagate.store.credentials import Credentials, CredentialStore
from quotagate.store.quotas import QuotaStore

if TYPE_CHECKING:
    from quotagate.store.kafka_quotas import KafkaQuotaStore
    from quotagate.store.replicated_table import OnRecord, ReplicatedTable

SQLITE: Final = "sqlite"
KAFKA: Final = "kafka"
BACKENDS: Final = (SQLITE, KAFKA)

QuotaBackend: TypeAlias = "QuotaStore | KafkaQuotaStore"
T = TypeVar("T")


class StoreError(RuntimeError):
    """The store cannot be opened; the message says which and why."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    backend: str = SQLITE
    path: str = "quotagate.db"
    topic: str = "_quotagate.quotagate.config"
    replication_factor: int = -1
    bootstrap: str = ""
    """The upstream cluster (``backend = "kafka"``)."""
    client_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """librdkafka security properties of the upstream (secrets among them: never printed)."""

    def describe(self) -> str:
        if self.backend == KAFKA:
            return f"topic {self.topic} on {self.bootstrap}"
        return f"file {self.path}"


def open_quota_store(
    settings: StoreSettings, client_id: str = "quotagate", on_record: OnRecord | None = None
) -> QuotaBackend:
    """``on_record`` (Kafka backend) sees every record as the topic is read: a history."""
    if settings.backend == KAFKA:
        from quotagate.store.kafka_quotas import KafkaQuotaStore  # noqa: PLC0415

        return KafkaQuotaStore(_table(settings, client_id, on_record))
    return _sqlite(QuotaStore.open, settings)


def open_credentials(settings: StoreSettings, client_id: str = "quotagate") -> Credentials:
    if settings.backend == KAFKA:
        from quotagate.store.kafka_credentials import KafkaCredentialStore  # noqa: PLC0415

        return KafkaCredentialStore(_table(settings, client_id))
    return _sqlite(CredentialStore.open, settings)


def _sqlite(opener: Callable[[str], T], settings: StoreSettings) -> T:
    try:
        return opener(settings.path)
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        raise StoreError(f"cannot open the store {settings.describe()}: {exc}") from exc


def _table(
    settings: StoreSettings, client_id: str, on_record: OnRecord | None = None
) -> ReplicatedTable:
    from quotagate.fleet.topic_log import TopicLogError  # noqa: PLC0415
    from quotagate.store.replicated_table import ReplicatedTable  # noqa: PLC0415

    if not settings.bootstrap:
        raise StoreError('[store] backend = "kafka" needs [upstream] bootstrap.servers')
    try:
        return ReplicatedTable.open(
            settings.bootstrap,
            settings.topic,
            replication_factor=settings.replication_factor,
            client_id=client_id,
            client_config=settings.client_config,
            on_record=on_record,
        )
    except TopicLogError as exc:
        raise StoreError(f"cannot open the store {settings.describe()}: {exc}") from exc
