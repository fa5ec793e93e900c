"""What the quota stages learn about the upstream at start, and what they say when they cannot."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.enforcement.upstream_facts import UpstreamFacts
from quotagate.gateway import parse_host_port
from quotagate.gateway.embedded import TansuBroker

pytestmark = pytest.mark.integration


async def test_an_upstream_that_will_not_tell_its_num_partitions_is_named_with_the_fix(
    tansu: TansuBroker, caplog: pytest.LogCaptureFixture
) -> None:
    facts = UpstreamFacts(None)
    with caplog.at_level(logging.INFO, logger="quotagate.enforcement.upstream_facts"):
        await facts.refresh([parse_host_port("upstream", tansu.bootstrap)])
    (line,) = [r.getMessage() for r in caplog.records if "num_partitions" in r.getMessage()]
    assert "event=upstream_num_partitions_unknown" in line
    assert 'error="the upstream closed the connection without answering describe_configs v' in line
    assert "charged_as=1" in line and "set [quotas] num.partitions" in line
    assert "None" not in line
    assert facts.default_partitions == 1


async def test_with_num_partitions_set_the_upstream_is_not_asked(
    tansu: TansuBroker, caplog: pytest.LogCaptureFixture
) -> None:
    facts = UpstreamFacts(TansuBroker.DEFAULT_PARTITIONS)
    with caplog.at_level(logging.DEBUG):
        await facts.refresh([parse_host_port("upstream", tansu.bootstrap)])
    assert not [r for r in caplog.records if "num_partitions" in r.getMessage()]
    assert facts.default_partitions == TansuBroker.DEFAULT_PARTITIONS


def test_tansu_gives_a_topic_without_a_count_the_partitions_serve_charges(
    tansu: TansuBroker,
) -> None:
    # `quotagate serve` tells the quota stages DEFAULT_PARTITIONS for its embedded tansu:
    # this holds it to what tansu does.
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    topic = "facts-default-partitions"
    admin.create_topics([NewTopic(topic, num_partitions=-1)], request_timeout=10)[topic].result()
    try:
        metadata = admin.list_topics(topic, timeout=10)
        assert len(metadata.topics[topic].partitions) == TansuBroker.DEFAULT_PARTITIONS
    finally:
        admin.delete_topics([topic], request_timeout=10)[topic].result()
