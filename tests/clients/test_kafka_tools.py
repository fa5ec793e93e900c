"""Kafka's own command-line tools (4.3.1) pointed at a gateway in front of the Kafka cluster, as
an operator would run them (``java -cp … MAIN …``, the classes behind ``kafka-configs.sh`` and
the rest):

* ``kafka-configs`` (``kafka.admin.ConfigCommand``) describes and alters client quotas of users,
  client ids, user + client id and the defaults; the gateway answers DescribeClientQuotas and
  AlterClientQuotas itself, from its store, and its runtime enforces what was set.
* ``kafka-topics`` (``org.apache.kafka.tools.TopicCommand``) creates, alters, lists and
  describes a topic: every partition led by a broker of the cluster.
* ``kafka-producer-perf-test`` (``org.apache.kafka.tools.ProducerPerformance``) under a produce
  quota set with ``kafka-configs`` achieves the quota.
* ``kafka-consumer-perf-test`` (``org.apache.kafka.tools.ConsumerPerformance``) reads it all in
  a group, and ``kafka-consumer-groups``
  (``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``) lists and describes that
  group: its offsets at the end, lag 0.

The gateway of the last test is `examples/kafka.toml` started with `quotagate serve`, as
README says to front a Kafka cluster.

Each tool is a JVM start (seconds of CPU here), so each command runs once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quotagate.enforcement import QuotaRuntime
from quotagate.gateway.embedded import free_port, free_ports
from quotagate.gateway.embedded.background import BackgroundGateway
from support.gateways import gateway_config, quota_gateway
from support.java import kafka_tool
from support.kafka_cluster import KafkaCluster
from support.served import Served
from support.upstreams import Upstream

pytestmark = pytest.mark.integration

CONFIGS = "kafka.admin.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
BROKER_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"

PERF_QUOTA = 100_000
"""producer_byte_rate set with kafka-configs on the producer perf test's client id."""
PERF_RECORDS = 50
PERF_RECORD_BYTES = 10_000
"""500 kB in records as large as the client matrix's: few per request, so the quota, which
counts whole requests, is the records' rate within a percent."""


@dataclasses.dataclass
class ToolsGateway:
    background: BackgroundGateway
    runtime: QuotaRuntime

    @property
    def bootstrap(self) -> str:
        return str(self.background.bootstrap)


@pytest.fixture(scope="module")
def tools_gateway(
    kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ToolsGateway]:
    upstream = Upstream("kafka", kafka.bootstrap(), tuple(kafka.nodes))
    config = gateway_config(
        upstream,
        store_path=str(tmp_path_factory.mktemp("tools") / "quotagate.db"),
        # Short windows, as the client matrix: the perf test's 5 s measure holds the quota.
        extra={
            "quotas": {
                "quota.window.num": 2,
                "quota.window.size.seconds": 1,
                # The tools connect without credentials (PLAINTEXT): like a Kafka cluster with
                # no authorizer, the gateway must let that principal alter quotas.
                "super.users": ["User:ANONYMOUS"],
            }
        },
    )
    with quota_gateway(config) as live:
        yield ToolsGateway(live.background, live.runtime)


def configs(gateway: ToolsGateway, *args: str) -> str:
    return kafka_tool(CONFIGS, "--bootstrap-server", gateway.bootstrap, *args)


def test_kafka_configs_client_quotas(tools_gateway: ToolsGateway) -> None:
    """Every entity kind kafka-configs names, altered and described through the gateway,
    lands in the gateway's own store and runtime (the upstream never sees them)."""
    user, client = f"tool-user-{uuid.uuid4().hex[:4]}", f"tool-client-{uuid.uuid4().hex[:4]}"
    alters = [
        (
            ["--entity-type", "users", "--entity-name", user],
            "producer_byte_rate=1048576,consumer_byte_rate=2097152",
        ),
        (["--entity-type", "clients", "--entity-name", client], "request_percentage=200"),
        (
            [
                "--entity-type",
                "users",
                "--entity-name",
                user,
                "--entity-type",
                "clients",
                "--entity-name",
                client,
            ],
            "producer_byte_rate=65536",
        ),
        (["--entity-type", "users", "--entity-default"], "controller_mutation_rate=10"),
        (["--entity-type", "clients", "--entity-default"], "consumer_byte_rate=4194304"),
    ]
    for entity, values in alters:
        out = configs(tools_gateway, "--alter", *entity, "--add-config", values)
        assert "Completed updating" in out, out
    quotas = tools_gateway.runtime.store_sync.client_quotas
    assert quotas[(("user", user),)] == {
        "producer_byte_rate": 1048576.0,
        "consumer_byte_rate": 2097152.0,
    }
    assert quotas[(("client-id", client),)] == {"request_percentage": 200.0}
    assert quotas[(("client-id", client), ("user", user))] == {"producer_byte_rate": 65536.0}
    assert quotas[(("user", None),)] == {"controller_mutation_rate": 10.0}
    assert quotas[(("client-id", None),)] == {"consumer_byte_rate": 4194304.0}

    described = configs(
        tools_gateway, "--describe", "--entity-type", "users", "--entity-name", user
    )
    assert f"Quota configs for user-principal '{user}' are " in described
    assert (
        "consumer_byte_rate=2097152.0" in described and "producer_byte_rate=1048576.0" in described
    )
    both = configs(
        tools_gateway,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        user,
        "--entity-type",
        "clients",
        "--entity-name",
        client,
    )
    assert f"user-principal '{user}', client-id '{client}' are producer_byte_rate=65536.0" in both
    every_client = configs(tools_gateway, "--describe", "--entity-type", "clients")
    assert f"client-id '{client}' are request_percentage=200.0" in every_client
    assert "default client-id are consumer_byte_rate=4194304.0" in every_client
    defaults = configs(tools_gateway, "--describe", "--entity-type", "users", "--entity-default")
    assert "default user-principal are controller_mutation_rate=10.0" in defaults

    out = configs(
        tools_gateway,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        user,
        "--delete-config",
        "consumer_byte_rate",
    )
    assert "Completed updating config" in out
    assert tools_gateway.runtime.store_sync.client_quotas[(("user", user),)] == {
        "producer_byte_rate": 1048576.0
    }
    # The default client quota would apply to every tool below: gone again.
    configs(
        tools_gateway,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-default",
        "--delete-config",
        "consumer_byte_rate",
    )
    assert (("client-id", None),) not in tools_gateway.runtime.store_sync.client_quotas


def test_topics_perf_tests_and_consumer_groups(
    tools_gateway: ToolsGateway, kafka: KafkaCluster
) -> None:
    gateway = tools_gateway.bootstrap
    topic, group = f"tools-{uuid.uuid4().hex[:6]}", f"tools-group-{uuid.uuid4().hex[:6]}"
    perf_client = f"perf-producer-{uuid.uuid4().hex[:4]}"

    created = kafka_tool(
        TOPICS,
        "--bootstrap-server",
        gateway,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "2",
        "--replication-factor",
        "3",
    )
    assert f"Created topic {topic}." in created
    kafka_tool(
        TOPICS, "--bootstrap-server", gateway, "--alter", "--topic", topic, "--partitions", "3"
    )
    listed = kafka_tool(TOPICS, "--bootstrap-server", gateway, "--list")
    assert topic in listed.split()
    described = kafka_tool(TOPICS, "--bootstrap-server", gateway, "--describe", "--topic", topic)
    leaders = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: ([\d,]+)", described)
    assert sorted(int(p) for p, _, _ in leaders) == [0, 1, 2], described
    assert {int(leader) for _, leader, _ in leaders} <= set(kafka.nodes)
    assert all(len(replicas.split(",")) == 3 for _, _, replicas in leaders)

    # The perf producer's quota, set with kafka-configs through the same gateway.
    configs(
        tools_gateway,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        perf_client,
        "--add-config",
        f"producer_byte_rate={PERF_QUOTA}",
    )
    produced = kafka_tool(
        PRODUCER_PERF,
        "--topic",
        topic,
        "--num-records",
        str(PERF_RECORDS),
        "--record-size",
        str(PERF_RECORD_BYTES),
        "--throughput",
        "-1",
        "--command-property",
        f"bootstrap.servers={gateway}",
        "acks=all",
        f"client.id={perf_client}",
        "batch.size=20000",
        "linger.ms=0",
    )
    final = re.search(
        rf"{PERF_RECORDS} records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", produced
    )
    assert final, produced
    ratio = float(final.group(1)) * PERF_RECORD_BYTES / PERF_QUOTA
    print(f"kafka-producer-perf-test: {final.group(0)}: {ratio:.3f} x the quota")
    # Held to the quota. With acks=all each mute starts only once three replicas answered,
    # and the tool's rate counts from its first send: measured 0.67-0.76 x here, on a loaded
    # machine, where the Java matrix's acks=1 producer achieves 1.0 x.
    assert 0.5 <= ratio <= 1.05, produced

    consumed = kafka_tool(
        CONSUMER_PERF,
        "--bootstrap-server",
        gateway,
        "--topic",
        topic,
        "--num-records",
        str(PERF_RECORDS),
        "--group",
        group,
        "--timeout",
        "60000",
    )
    print(f"kafka-consumer-perf-test:\n{consumed}")
    lines = [line for line in consumed.splitlines() if "," in line]
    summary = dict(zip(lines[0].split(", "), lines[1].split(", "), strict=True))
    assert int(summary["data.consumed.in.nMsg"]) == PERF_RECORDS, consumed

    groups = kafka_tool(GROUPS, "--bootstrap-server", gateway, "--list")
    assert group in groups.split()
    offsets = kafka_tool(GROUPS, "--bootstrap-server", gateway, "--describe", "--group", group)
    print(f"kafka-consumer-groups --describe:\n{offsets}")
    rows = [line.split() for line in offsets.splitlines() if line.startswith(group)]
    assert len(rows) == 3, offsets
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: every record read.
    assert sum(int(row[3]) for row in rows) == PERF_RECORDS
    assert all(row[3] == row[4] and row[5] == "0" for row in rows), offsets

    kafka_tool(TOPICS, "--bootstrap-server", gateway, "--delete", "--topic", topic)


EXAMPLE = Path(__file__).parents[2] / "examples" / "kafka.toml"


def test_the_example_config_fronts_kafka_for_its_tools(
    kafka: KafkaCluster, tmp_path: Path, wait_for: Any
) -> None:
    """README's "In front of your Kafka": ``quotagate serve --config examples/kafka.toml`` (its
    ports and store moved to free ones, the upstream made this cluster), then kafka-configs
    alters a quota through it and describes it back, and every broker Kafka's tools are told
    of is a gateway port."""
    listen, broker_ports, metrics = free_port(), free_ports(64), free_port()
    text = (
        EXAMPLE.read_text()
        .replace('"127.0.0.1:9092"', f'"{kafka.bootstrap()}"')
        .replace("127.0.0.1:9192", f"127.0.0.1:{listen}")
        .replace("broker.port.start = 9193", f"broker.port.start = {broker_ports}")
        .replace("127.0.0.1:9404", f"127.0.0.1:{metrics}")
        .replace("var/quotagate-kafka.db", str(tmp_path / "quotagate.db"))
    )
    config = tmp_path / "kafka.toml"
    config.write_text(text)
    served = Served(config)
    bootstrap = f"127.0.0.1:{listen}"
    try:
        wait_for(lambda: _accepting(listen), 30, "the gateway listening", served.output)
        entity = ["--entity-type", "clients", "--entity-name", "perf"]
        altered = kafka_tool(
            CONFIGS, "--bootstrap-server", bootstrap, "--alter", *entity,
            "--add-config", "producer_byte_rate=102400",
        )  # fmt: skip
        assert "Completed updating config" in altered, altered
        described = kafka_tool(CONFIGS, "--bootstrap-server", bootstrap, "--describe", *entity)
        assert "client-id 'perf' are producer_byte_rate=102400.0" in described, described
        versions = kafka_tool(BROKER_VERSIONS, "--bootstrap-server", bootstrap)
        named = {int(port) for port in re.findall(r"^127\.0\.0\.1:(\d+) \(id: ", versions, re.M)}
        assert named == {broker_ports + n - 1 for n in kafka.nodes}, versions
    finally:
        served.stop()
    assert "ERROR" not in served.output(), served.output()[-3000:]


def _accepting(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False
