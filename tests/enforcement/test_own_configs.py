"""DescribeConfigs lists the configs the gateway keeps itself (set through
IncrementalAlterConfigs, or from its config file) beside the upstream's own: the topic
threshold on its topic, the total threshold, tenant rules and exempt principals on a broker
resource, and on the default broker resource (``kafka-configs --entity-type brokers
--entity-default --describe``) the dynamic ones only."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from quotagate.protocol import api_table
from quotagate.protocol.kio_nested import build, nested

RULES = "RULE:client-id:^(team)-.*$/$1/"


def _set(admin: AdminClient, resource: ConfigResource) -> None:
    admin.incremental_alter_configs([resource])[resource].result(30)


def _described(admin: AdminClient, resource: ConfigResource) -> dict[str, Any]:
    return admin.describe_configs([resource])[resource].result(30)  # type: ignore[no-any-return]


def test_describe_configs_lists_the_gateways_own_configs(
    quota_tansu: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    gateway = start_quota_gateway(
        quota_tansu.bootstrap,
        quotas={"super.users": ["User:ANONYMOUS"], "quota.exempt.principals": ["User:canary"]},
    )
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = f"described-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    set_ = AlterConfigOpType.SET
    _set(admin, ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("bytes.in.per.sec.threshold", "50000", incremental_operation=set_),
    ]))  # fmt: skip
    _set(admin, ConfigResource(ResourceType.BROKER, "111", incremental_configs=[
        ConfigEntry("total.bytes.in.per.sec.threshold", "900000", incremental_operation=set_),
        ConfigEntry("tenant.mapping.rules", RULES, incremental_operation=set_),
    ]))  # fmt: skip

    configs = _described(admin, ConfigResource(ResourceType.TOPIC, topic))
    threshold = configs["bytes.in.per.sec.threshold"]
    assert (threshold.value, threshold.source) == ("50000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    other = f"undescribed-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(other, 1, 1)]).values():
        future.result(30)
    assert "bytes.in.per.sec.threshold" not in _described(
        admin, ConfigResource(ResourceType.TOPIC, other)
    )

    broker = _described(admin, ConfigResource(ResourceType.BROKER, "111"))
    dynamic = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert (broker["tenant.mapping.rules"].value, broker["tenant.mapping.rules"].source) == (
        RULES,
        dynamic,
    )
    assert broker["total.bytes.in.per.sec.threshold"].value == "900000"
    exempt = broker["quota.exempt.principals"]  # from the config file
    assert (exempt.value, exempt.source) == ("User:canary", ConfigSource.STATIC_BROKER_CONFIG.value)

    # Only what was asked for.
    schema: Any = api_table.request_schema(32, 4)
    resource_cls = nested(schema, "DescribeConfigsResource")
    only_rules = build(
        schema,
        resources=(
            build(resource_cls, resource_type=4, resource_name="111",
                  configuration_keys=("tenant.mapping.rules",)),
            build(resource_cls, resource_type=4, resource_name="", configuration_keys=None),
        ),
        include_synonyms=False,
        include_documentation=True,
    )  # fmt: skip
    with raw_client(*gateway.host_port) as client:
        response = client.send(only_rules)
    named, default = response.results
    assert [c.name for c in named.configs if c.name == "tenant.mapping.rules"] == [
        "tenant.mapping.rules"
    ]
    assert "total.bytes.in.per.sec.threshold" not in {c.name for c in named.configs}
    assert "RULE:user:PATTERN/REPLACEMENT/" in (
        next(c for c in named.configs if c.name == "tenant.mapping.rules").documentation or ""
    )
    # The default resource: the dynamic defaults, not the config file's exempt principals.
    assert int(default.error_code) == 0, default
    ours = {c.name: c.value for c in default.configs}
    assert ours.get("tenant.mapping.rules") == RULES
    assert ours.get("total.bytes.in.per.sec.threshold") == "900000"
    assert "quota.exempt.principals" not in ours
