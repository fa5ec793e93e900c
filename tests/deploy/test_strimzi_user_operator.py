"""What Strimzi's User Operator does for a KafkaUser with SCRAM-SHA-512 authentication and
quotas, done through the gateway with Kafka's own admin client (kafka-configs, the same Admin
calls: DescribeUserScramCredentials, AlterUserScramCredentials, AlterClientQuotas,
DescribeClientQuotas). The quotas land in the gateway's store and are enforced there; the
SCRAM credential goes on to the Kafka cluster, whose SASL listeners use it (docs/deploy.md)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime
from quotagate.gateway.embedded.background import BackgroundGateway
from support.gateways import gateway_config
from support.java import kafka_tool
from support.upstreams import Upstream

pytestmark = pytest.mark.integration

CONFIGS = "kafka.admin.ConfigCommand"


def test_a_kafka_user_applied_through_the_gateway(upstream_kafka: Upstream, tmp_path: Path) -> None:
    config = gateway_config(
        upstream_kafka,
        store_path=str(tmp_path / "quotagate.db"),
        # The operator's admin client is a super user of the gateway, as of the cluster.
        extra={"quotas": {"super.users": ["User:ANONYMOUS"]}},
    )
    runtime = QuotaRuntime.from_config(config)
    gateway = BackgroundGateway(config, plugins=[QuotaEnforcement(runtime)])
    gateway.start()
    user = f"strimzi-{uuid.uuid4().hex[:6]}"
    entity = ["--entity-type", "users", "--entity-name", user]
    try:
        through = ["--bootstrap-server", str(gateway.bootstrap)]
        # Two calls, as the operator makes them (and as kafka-configs insists).
        for values in (
            "SCRAM-SHA-512=[iterations=8192,password=not-a-real-one]",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152,request_percentage=55",
        ):
            altered = kafka_tool(CONFIGS, *through, "--alter", *entity, "--add-config", values)
            assert "Completed updating" in altered, altered
        described = kafka_tool(CONFIGS, *through, "--describe", *entity)
    finally:
        gateway.stop()
    # Quotas: the gateway's, answered from its store, and not the cluster's.
    assert runtime.store_sync.client_quotas[(("user", user),)] == {
        "producer_byte_rate": 1048576.0,
        "consumer_byte_rate": 2097152.0,
        "request_percentage": 55.0,
    }
    assert "producer_byte_rate=1048576.0" in described, described
    # The SCRAM credential: forwarded to Kafka, described back through the gateway...
    assert "SCRAM-SHA-512=iterations=8192" in described, described
    # ...and held by the cluster itself, which has no quota for the user.
    direct = kafka_tool(
        CONFIGS, "--bootstrap-server", upstream_kafka.bootstrap, "--describe", *entity
    )
    assert "SCRAM-SHA-512=iterations=8192" in direct, direct
    assert "producer_byte_rate" not in direct, direct
