"""kio request entities for every version the client speaks, and what it reads back.

Fields differ between versions (``allow_auto_topic_creation`` from Metadata v4, topic states
instead of names from DeleteTopics v6, ...). Builders therefore name the values they mean and
:func:`_build` keeps those the version has; a missing field without a default is a bug here
and surfaces as a TypeError from the dataclass.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from kio.static.primitive import i8, i16, i32, i32Timedelta

from quotagate.client.quotas import ClientQuotaAlteration
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.throttle_time import timedelta_ms
from quotagate.quota.entity_filter import ClientQuotaFilter


@dataclasses.dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create; -1 leaves partitions / replication factor to the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = dataclasses.field(default_factory=dict)


def _module(api_key: int, api_version: int) -> ModuleType:
    return sys.modules[api_table.request_schema(api_key, api_version).__module__]


def _build(schema: type[Any], **values: Any) -> Any:
    names = {field.name for field in dataclasses.fields(schema)}
    return schema(**{name: value for name, value in values.items() if name in names})


def _timeout(timeout_ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=max(0, timeout_ms)))


def api_versions_request(api_version: int, software_version: str) -> Any:
    module = _module(api_keys.API_VERSIONS, api_version)
    return _build(
        module.ApiVersionsRequest,
        client_software_name="quotagate",
        client_software_version=software_version,
    )


def metadata_request(api_version: int) -> Any:
    """Brokers and controller only: an empty topic list (all topics on v0, harmless)."""
    module = _module(api_keys.METADATA, api_version)
    return _build(
        module.MetadataRequest,
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def create_topics_request(
    api_version: int, topics: Sequence[NewTopic], timeout_ms: int, validate_only: bool
) -> Any:
    module = _module(api_keys.CREATE_TOPICS, api_version)
    creatable = tuple(
        _build(
            module.CreatableTopic,
            name=topic.name,
            num_partitions=i32(topic.num_partitions),
            replication_factor=i16(topic.replication_factor),
            assignments=(),
            configs=tuple(
                _build(module.CreatableTopicConfig, name=key, value=value)
                for key, value in topic.configs.items()
            ),
        )
        for topic in topics
    )
    return _build(
        module.CreateTopicsRequest,
        topics=creatable,
        timeout=_timeout(timeout_ms),
        validate_only=validate_only,
    )


def delete_topics_request(api_version: int, names: Sequence[str], timeout_ms: int) -> Any:
    module = _module(api_keys.DELETE_TOPICS, api_version)
    states = (
        tuple(_build(module.DeleteTopicState, name=name, topic_id=None) for name in names)
        if hasattr(module, "DeleteTopicState")
        else ()
    )
    return _build(
        module.DeleteTopicsRequest,
        topic_names=tuple(names),
        topics=states,
        timeout=_timeout(timeout_ms),
    )


def create_partitions_request(
    api_version: int, counts: Mapping[str, int], timeout_ms: int, validate_only: bool
) -> Any:
    module = _module(api_keys.CREATE_PARTITIONS, api_version)
    topics = tuple(
        _build(module.CreatePartitionsTopic, name=name, count=i32(count), assignments=None)
        for name, count in counts.items()
    )
    return _build(
        module.CreatePartitionsRequest,
        topics=topics,
        timeout=_timeout(timeout_ms),
        validate_only=validate_only,
    )


def describe_client_quotas_request(api_version: int, quota_filter: ClientQuotaFilter) -> Any:
    module = _module(api_keys.DESCRIBE_CLIENT_QUOTAS, api_version)
    components = tuple(
        _build(
            module.ComponentData,
            entity_type=component.entity_type,
            match_type=i8(int(component.match_type)),
            match=component.match,
        )
        for component in quota_filter.components
    )
    return _build(
        module.DescribeClientQuotasRequest, components=components, strict=quota_filter.strict
    )


def alter_client_quotas_request(
    api_version: int, alterations: Sequence[ClientQuotaAlteration], validate_only: bool
) -> Any:
    module = _module(api_keys.ALTER_CLIENT_QUOTAS, api_version)
    entries = tuple(
        _build(
            module.EntryData,
            entity=tuple(
                _build(module.EntityData, entity_type=entity_type, entity_name=name)
                for entity_type, name in alteration.entity.entries
            ),
            ops=tuple(
                # Kafka sends a removal as Remove=true with a value of 0.0.
                _build(
                    module.OpData,
                    key=op.key,
                    value=0.0 if op.value is None else float(op.value),
                    remove=op.value is None,
                )
                for op in alteration.ops
            ),
        )
        for alteration in alterations
    )
    return _build(module.AlterClientQuotasRequest, entries=entries, validate_only=validate_only)


BROKER_RESOURCE = 4
_SET, _DELETE = 0, 1


def broker_defaults_request(
    api_version: int, configs: Mapping[str, str | None], validate_only: bool
) -> Any:
    """IncrementalAlterConfigs on the default broker resource (named ""), as ``kafka-configs
    --entity-type brokers --entity-default --alter`` sends it: SET each value, DELETE a None."""
    module = _module(api_keys.INCREMENTAL_ALTER_CONFIGS, api_version)
    resource = _build(
        module.AlterConfigsResource,
        resource_type=i8(BROKER_RESOURCE),
        resource_name="",
        configs=tuple(
            _build(
                module.AlterableConfig,
                name=name,
                config_operation=i8(_DELETE if value is None else _SET),
                value=value,
            )
            for name, value in configs.items()
        ),
    )
    return _build(
        module.IncrementalAlterConfigsRequest, resources=(resource,), validate_only=validate_only
    )


def describe_broker_defaults_request(api_version: int, names: Sequence[str]) -> Any:
    """DescribeConfigs of the default broker resource (named ""), as ``kafka-configs
    --entity-type brokers --entity-default --describe`` sends it, for ``names`` only."""
    module = _module(api_keys.DESCRIBE_CONFIGS, api_version)
    resource = _build(
        module.DescribeConfigsResource,
        resource_type=i8(BROKER_RESOURCE),
        resource_name="",
        configuration_keys=tuple(names),
    )
    return _build(module.DescribeConfigsRequest, resources=(resource,))


def throttle_time_ms(response: Any) -> int:
    """A response's ``throttle_time_ms`` (0 for versions without the field)."""
    value = getattr(response, "throttle_time", None)
    return 0 if value is None else timedelta_ms(value)


def error_code(value: Any) -> int:
    """kio error codes are enums; the wire value is their ``value``."""
    return int(getattr(value, "value", value))
