"""What the quota stages need to know about the upstream cluster, learned in the background.

* which API keys it serves (an API it lacks is answered by the gateway, never forwarded);
* its ``num.partitions`` (what a CreateTopics with ``num_partitions = -1`` creates, spec §5.3);
* how many partitions each topic has (what a DeleteTopics or CreatePartitions mutates).

Partition counts are refreshed from a full Metadata request every ``refresh_s`` and also
learned from Metadata and CreateTopics responses passing through the gateway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Final

from quotagate.gateway import ControlChannel, UpstreamSecurity, build_request
from quotagate.logs import error_text, kv
from quotagate.protocol import api_keys, api_support, api_table
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.kio_nested import nested

log = logging.getLogger(__name__)

KAFKA_DEFAULT_NUM_PARTITIONS: Final = 1
_DESCRIBE_CONFIGS: Final = 32
_BROKER_RESOURCE: Final = 4
_TIMEOUT_S: Final = 10.0


class UpstreamFacts:
    def __init__(self, num_partitions_override: int | None) -> None:
        self.num_partitions_override = num_partitions_override
        self.learned_num_partitions: int | None = None
        self.api_keys: frozenset[int] | None = None
        """None until learned: then everything is assumed supported."""
        self.partitions: dict[str, int] = {}
        """Partition count per topic, as far as the gateway knows (read-only for callers)."""
        self._num_partitions_asked = False
        self._learned_during_refresh: dict[str, int | None] | None = None

    @property
    def default_partitions(self) -> int:
        if self.num_partitions_override is not None:
            return self.num_partitions_override
        if self.learned_num_partitions is not None:
            return self.learned_num_partitions
        return KAFKA_DEFAULT_NUM_PARTITIONS

    def supports(self, api_key: int) -> bool:
        return self.api_keys is None or api_key in self.api_keys

    def learn_metadata(self, response: Any) -> None:
        for topic in response.topics:
            if int(topic.error_code) == 0 and topic.name:
                self.set_partitions(str(topic.name), len(topic.partitions))

    def set_partitions(self, topic: str, count: int | None) -> None:
        """What a response just taught: ``count`` partitions, or (None) the topic is gone.

        Also remembered while a refresh is in flight, so that the refresh's older snapshot
        cannot undo a topic created or deleted after it was taken.
        """
        if count is None:
            self.partitions.pop(topic, None)
        else:
            self.partitions[topic] = count
        if self._learned_during_refresh is not None:
            self._learned_during_refresh[topic] = count

    async def refresh(
        self, bootstrap: Sequence[HostPort], security: UpstreamSecurity | None = None
    ) -> None:
        """One round against the first reachable bootstrap server; raises if none is."""
        last: BaseException | None = None
        for address in bootstrap:
            try:
                await self._refresh_from(address, security or UpstreamSecurity())
                return
            except (OSError, TimeoutError, ConnectionError) as exc:
                last = exc
        if last is not None:
            raise last

    async def _refresh_from(self, address: HostPort, security: UpstreamSecurity) -> None:
        self._learned_during_refresh = {}
        try:
            await self._refresh_snapshot(address, security)
        finally:
            self._learned_during_refresh = None

    async def _refresh_snapshot(self, address: HostPort, security: UpstreamSecurity) -> None:
        channel = await ControlChannel.open(address, _TIMEOUT_S, security)
        try:
            versions = await channel.request(build_request(api_keys.API_VERSIONS, 0), _TIMEOUT_S)
            ranges = api_support.advertised_ranges(versions)
            self.api_keys = frozenset(r.api_key for r in ranges)
            metadata = await channel.request(
                build_request(
                    api_keys.METADATA,
                    api_support.best_version(api_keys.METADATA, ranges),
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                ),
                _TIMEOUT_S,
            )
            snapshot = {
                str(t.name): len(t.partitions)
                for t in metadata.topics
                if int(t.error_code) == 0 and t.name
            }
            assert self._learned_during_refresh is not None
            for topic, count in self._learned_during_refresh.items():
                if count is None:
                    snapshot.pop(topic, None)
                else:
                    snapshot[topic] = count
            self.partitions = snapshot
        finally:
            channel.close()
        # Asked once, and only when no [quotas] num.partitions overrides the answer: some
        # upstreams (tansu) drop the connection on a broker resource.
        if (
            not self._num_partitions_asked
            and self.num_partitions_override is None
            and metadata.brokers
        ):
            self._num_partitions_asked = True
            broker_id = int(metadata.brokers[0].node_id)
            channel = await ControlChannel.open(address, _TIMEOUT_S, security)
            try:
                await self._learn_num_partitions(channel, ranges, broker_id)
            except (OSError, TimeoutError, ConnectionError) as exc:
                log.info(
                    kv(
                        "upstream_num_partitions_unknown",
                        upstream=address,
                        broker=broker_id,
                        error=error_text(exc),
                        charged_as=KAFKA_DEFAULT_NUM_PARTITIONS,
                        note="a CreateTopics that leaves the partition count to the upstream "
                        "is charged as Kafka's default; set [quotas] num.partitions to the "
                        "upstream's num.partitions if it differs",
                    )
                )
            finally:
                channel.close()

    async def _learn_num_partitions(
        self, channel: ControlChannel, ranges: list[api_support.VersionRange], broker_id: int
    ) -> None:
        if not any(r.api_key == _DESCRIBE_CONFIGS for r in ranges):
            return
        version = api_support.best_version(_DESCRIBE_CONFIGS, ranges)
        schema: Any = api_table.request_schema(_DESCRIBE_CONFIGS, version)
        resource = nested(schema, "DescribeConfigsResource")(
            resource_type=_BROKER_RESOURCE,
            resource_name=str(broker_id),
            configuration_keys=("num.partitions",),
        )
        response = await channel.request(
            build_request(
                _DESCRIBE_CONFIGS,
                version,
                resources=(resource,),
                include_synonyms=False,
                include_documentation=False,
            ),
            _TIMEOUT_S,
        )
        for result in response.results:
            for config in result.configs:
                if config.name == "num.partitions" and config.value:
                    try:
                        self.learned_num_partitions = int(config.value)
                    except ValueError:
                        continue
                    log.info(kv("upstream_num_partitions", value=config.value))


async def refresh_forever(
    facts: UpstreamFacts,
    bootstrap: Sequence[HostPort],
    every_s: float,
    security: UpstreamSecurity | None = None,
) -> None:
    """Refresh now, then every ``every_s``; failures are logged and retried."""
    while True:
        try:
            await facts.refresh(bootstrap, security)
        except Exception as exc:  # keep the last facts; try again later
            log.info(kv("upstream_facts_failed", error=error_text(exc)))
            await asyncio.sleep(min(every_s, 2.0))
            continue
        await asyncio.sleep(every_s)
