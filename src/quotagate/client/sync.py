"""``SyncAdminClient``: the admin client for code that is not async (scripts, the CLI).

A thin wrapper: it owns one event loop (``asyncio.Runner``) and runs each call to
completion on it. Not for use from inside a running event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType

from quotagate.client.admin import AdminClient, QuotaValues
from quotagate.client.clock import Clock, monotonic_ms
from quotagate.client.config import AdminConfig
from quotagate.client.errors import KafkaError
from quotagate.client.events import ClientEvents
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.requests import NewTopic
from quotagate.client.results import AdminResult
from quotagate.quota.backoff import RandomSource
from quotagate.quota.entity_filter import ClientQuotaFilter


class SyncAdminClient:
    def __init__(
        self,
        config: AdminConfig | str,
        *,
        clock: Clock = monotonic_ms,
        rng: RandomSource | None = None,
        events: ClientEvents | None = None,
    ) -> None:
        self._runner = asyncio.Runner()
        self._client = AdminClient(config, clock=clock, rng=rng, events=events)

    def __enter__(self) -> SyncAdminClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._runner.run(self._client.close())
        finally:
            self._runner.close()

    def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
        retry_on_quota_violation: bool = True,
    ) -> AdminResult[str]:
        return self._runner.run(
            self._client.create_topics(
                topics,
                timeout_ms=timeout_ms,
                validate_only=validate_only,
                retry_on_quota_violation=retry_on_quota_violation,
            )
        )

    def delete_topics(
        self,
        names: Iterable[str],
        *,
        timeout_ms: int | None = None,
        retry_on_quota_violation: bool = True,
    ) -> AdminResult[str]:
        return self._runner.run(
            self._client.delete_topics(
                names, timeout_ms=timeout_ms, retry_on_quota_violation=retry_on_quota_violation
            )
        )

    def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
        retry_on_quota_violation: bool = True,
    ) -> AdminResult[str]:
        return self._runner.run(
            self._client.create_partitions(
                new_counts,
                timeout_ms=timeout_ms,
                validate_only=validate_only,
                retry_on_quota_violation=retry_on_quota_violation,
            )
        )

    def describe_client_quotas(
        self, quota_filter: ClientQuotaFilter | None = None, *, timeout_ms: int | None = None
    ) -> QuotaValues:
        return self._runner.run(
            self._client.describe_client_quotas(quota_filter, timeout_ms=timeout_ms)
        )

    def alter_broker_defaults(
        self,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> KafkaError | None:
        return self._runner.run(
            self._client.alter_broker_defaults(
                configs, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    def describe_broker_defaults(
        self, names: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, str | None] | KafkaError:
        return self._runner.run(self._client.describe_broker_defaults(names, timeout_ms=timeout_ms))

    def alter_client_quotas(
        self,
        alterations: Sequence[ClientQuotaAlteration],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResult[ClientQuotaEntity]:
        return self._runner.run(
            self._client.alter_client_quotas(
                alterations, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )
