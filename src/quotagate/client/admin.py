"""``AdminClient``: topic and client-quota administration over the Kafka protocol (asyncio).

Behaves like Kafka's Java ``KafkaAdminClient`` where the spec describes it: KIP-599 retries
of topics refused by a controller-mutation quota (§5.6), KIP-219 self-throttling (§6.4) and
KIP-580 backoff (§7).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from quotagate.client import requests
from quotagate.client.backoff_policy import retry_backoff
from quotagate.client.call import CallRunner, Target
from quotagate.client.clock import Clock, monotonic_ms
from quotagate.client.cluster import Cluster
from quotagate.client.config import AdminConfig
from quotagate.client.errors import KafkaError, error_for
from quotagate.client.events import ClientEvents
from quotagate.client.network import NetworkClient
from quotagate.client.quota_retry import run_with_quota_retry
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.requests import NewTopic, error_code, throttle_time_ms
from quotagate.client.results import AdminResult
from quotagate.protocol import api_keys
from quotagate.protocol.errors import ErrorCode
from quotagate.quota.backoff import RandomSource
from quotagate.quota.entity_filter import ClientQuotaFilter

QuotaValues = dict[ClientQuotaEntity, dict[str, float]]


class AdminClient:
    """Use as ``async with AdminClient("127.0.0.1:9092") as admin: ...``.

    ``clock`` (monotonic milliseconds) and ``rng`` (the jitter source) are injectable for
    tests; ``events`` observes connects, requests and throttles.
    """

    def __init__(
        self,
        config: AdminConfig | str,
        *,
        clock: Clock = monotonic_ms,
        rng: RandomSource | None = None,
        events: ClientEvents | None = None,
    ) -> None:
        self.config = AdminConfig.of(config) if isinstance(config, str) else config
        self._clock = clock
        self._cluster = Cluster(self.config.bootstrap_servers)
        self._network = NetworkClient(self.config, clock, rng, events)
        self._calls = CallRunner(
            self.config, self._network, self._cluster, clock, retry_backoff(self.config, rng)
        )

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._network.close()

    # -- topics (controller mutations, KIP-599) ------------------------------------------------

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
        retry_on_quota_violation: bool = True,
    ) -> AdminResult[str]:
        by_name = {topic.name: topic for topic in topics}
        deadline = self._deadline(timeout_ms)

        async def send(names: list[str]) -> dict[str, KafkaError | None]:
            def build(version: int) -> Any:
                return requests.create_topics_request(
                    version, [by_name[n] for n in names], self._remaining(deadline), validate_only
                )

            def handle(response: Any, _version: int) -> dict[str, KafkaError | None]:
                return _topic_outcomes(names, response, response.topics)

            return await self._calls.run(
                "createTopics", api_keys.CREATE_TOPICS, Target.CONTROLLER, build, handle, deadline
            )

        return AdminResult(
            await run_with_quota_retry(list(by_name), send, retry_on_quota_violation, self._clock)
        )

    async def delete_topics(
        self,
        names: Iterable[str],
        *,
        timeout_ms: int | None = None,
        retry_on_quota_violation: bool = True,
    ) -> AdminResult[str]:
        deadline = self._deadline(timeout_ms)

        async def send(batch: list[str]) -> dict[str, KafkaError | None]:
            def build(version: int) -> Any:
                return requests.delete_topics_request(version, batch, self._remaining(deadline))

            def handle(response: Any, _version: int) -> dict[str, KafkaError | None]:
                return _topic_outcomes(batch, response, response.responses)

            return await self._calls.run(
                "deleteTopics", api_keys.DELETE_TOPICS, Target.CONTROLLER, build, handle, deadline
            )

        unique = list(dict.fromkeys(names))
        return AdminResult(
            await run_with_quota_retry(unique, send, retry_on_quota_violation, self._clock)
        )

    async def create_partitions(
        self,
        new_counts: Mapping[str, int],
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
        retry_on_quota_violation: bool = True,
    ) -> AdminResult[str]:
        """Grow each topic to the given total number of partitions."""
        deadline = self._deadline(timeout_ms)

        async def send(batch: list[str]) -> dict[str, KafkaError | None]:
            def build(version: int) -> Any:
                return requests.create_partitions_request(
                    version,
                    {name: new_counts[name] for name in batch},
                    self._remaining(deadline),
                    validate_only,
                )

            def handle(response: Any, _version: int) -> dict[str, KafkaError | None]:
                return _topic_outcomes(batch, response, response.results)

            return await self._calls.run(
                "createPartitions",
                api_keys.CREATE_PARTITIONS,
                Target.CONTROLLER,
                build,
                handle,
                deadline,
            )

        return AdminResult(
            await run_with_quota_retry(
                list(new_counts), send, retry_on_quota_violation, self._clock
            )
        )

    # -- client quotas (KIP-546) ---------------------------------------------------------------

    async def describe_client_quotas(
        self, quota_filter: ClientQuotaFilter | None = None, *, timeout_ms: int | None = None
    ) -> QuotaValues:
        """Quota values of the entities the filter matches (all of them by default).

        Raises :class:`KafkaError` with the broker's code (e.g. INVALID_REQUEST) on failure.
        """
        chosen = quota_filter if quota_filter is not None else ClientQuotaFilter.all()

        def build(version: int) -> Any:
            return requests.describe_client_quotas_request(version, chosen)

        def handle(response: Any, _version: int) -> QuotaValues:
            code = error_code(response.error_code)
            if code != ErrorCode.NONE:
                raise error_for(code, response.error_message, throttle_time_ms(response))
            return {
                ClientQuotaEntity.from_pairs(
                    (part.entity_type, part.entity_name) for part in entry.entity
                ): {value.key: float(value.value) for value in entry.values}
                for entry in response.entries or ()
            }

        return await self._calls.run(
            "describeClientQuotas",
            api_keys.DESCRIBE_CLIENT_QUOTAS,
            Target.LEAST_LOADED,
            build,
            handle,
            self._deadline(timeout_ms),
        )

    async def alter_client_quotas(
        self,
        alterations: Sequence[ClientQuotaAlteration],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> AdminResult[ClientQuotaEntity]:
        """Apply each alteration atomically per entity; the result has one outcome per entity."""

        def build(version: int) -> Any:
            return requests.alter_client_quotas_request(version, alterations, validate_only)

        def handle(response: Any, _version: int) -> dict[ClientQuotaEntity, KafkaError | None]:
            outcomes: dict[ClientQuotaEntity, KafkaError | None] = {}
            for entry in response.entries:
                entity = ClientQuotaEntity.from_pairs(
                    (part.entity_type, part.entity_name) for part in entry.entity
                )
                code = error_code(entry.error_code)
                outcomes[entity] = (
                    None if code == ErrorCode.NONE else KafkaError(code, entry.error_message)
                )
            return {
                a.entity: outcomes.get(a.entity, _missing("entity", str(a.entity)))
                for a in alterations
            }

        return AdminResult(
            await self._calls.run(
                "alterClientQuotas",
                api_keys.ALTER_CLIENT_QUOTAS,
                Target.CONTROLLER,
                build,
                handle,
                self._deadline(timeout_ms),
            )
        )

    async def alter_broker_defaults(
        self,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> KafkaError | None:
        """Set (None: delete) dynamic configs of the default broker resource in one
        IncrementalAlterConfigs; the resource's error, None when it took them."""

        def build(version: int) -> Any:
            return requests.broker_defaults_request(version, configs, validate_only)

        def handle(response: Any, _version: int) -> KafkaError | None:
            for entry in response.responses:
                code = error_code(entry.error_code)
                if code != ErrorCode.NONE:
                    return KafkaError(code, entry.error_message)
            return None

        outcome: KafkaError | None = await self._calls.run(
            "incrementalAlterConfigs",
            api_keys.INCREMENTAL_ALTER_CONFIGS,
            Target.LEAST_LOADED,
            build,
            handle,
            self._deadline(timeout_ms),
        )
        return outcome

    async def describe_broker_defaults(
        self, names: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, str | None] | KafkaError:
        """The values of ``names`` on the default broker resource (a name not set is left
        out), or the resource's error."""

        def build(version: int) -> Any:
            return requests.describe_broker_defaults_request(version, names)

        def handle(response: Any, _version: int) -> dict[str, str | None] | KafkaError:
            described: dict[str, str | None] = {}
            for result in response.results:
                code = error_code(result.error_code)
                if code != ErrorCode.NONE:
                    return KafkaError(code, result.error_message)
                described.update((c.name, c.value) for c in result.configs if c.name in names)
            return described

        outcome: dict[str, str | None] | KafkaError = await self._calls.run(
            "describeConfigs",
            api_keys.DESCRIBE_CONFIGS,
            Target.LEAST_LOADED,
            build,
            handle,
            self._deadline(timeout_ms),
        )
        return outcome

    # -- helpers -------------------------------------------------------------------------------

    def _deadline(self, timeout_ms: int | None) -> float:
        chosen = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        if chosen < 0:
            raise ValueError("timeout_ms must be >= 0")
        return self._clock() + chosen

    def _remaining(self, deadline_ms: float) -> int:
        """The broker-side timeout to put in a request: what is left of the call's time."""
        return max(0, int(deadline_ms - self._clock()))


def _topic_outcomes(
    names: Sequence[str], response: Any, results: Iterable[Any]
) -> dict[str, KafkaError | None]:
    """Per-topic outcomes; error 89 carries the response's throttle time.

    NOT_CONTROLLER fails the whole call (retriably) so it is retried after a metadata
    refresh, as Java's ``handleNotControllerError`` does.
    """
    throttle_ms = throttle_time_ms(response)
    outcomes: dict[str, KafkaError | None] = {}
    for result in results:
        code = error_code(result.error_code)
        message = getattr(result, "error_message", None)
        if code == ErrorCode.NOT_CONTROLLER:
            raise KafkaError(code, message)
        outcomes[str(result.name)] = (
            None if code == ErrorCode.NONE else error_for(code, message, throttle_ms)
        )
    return {name: outcomes.get(name, _missing("topic", name)) for name in names}


def _missing(kind: str, name: str) -> KafkaError:
    return KafkaError(
        ErrorCode.UNKNOWN_SERVER_ERROR,
        f"The server response did not contain a reference to {kind} {name}",
    )
