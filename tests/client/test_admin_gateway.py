"""The admin client through the gateway to a real tansu broker: version negotiation,
bootstrap → metadata → controller, topic creation and deletion (checked with an independent
client, confluent-kafka), the synchronous wrapper, and reconnect backoff against a dead port."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from quotagate.client import (
    AdminClient,
    AdminConfig,
    ClientEvents,
    KafkaTimeoutError,
    NewTopic,
    SyncAdminClient,
)
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol import api_keys
from quotagate.protocol.host_port import HostPort

pytestmark = pytest.mark.integration

TANSU_NODE_ID = 111


class Recorder(ClientEvents):
    def __init__(self) -> None:
        self.attempts: list[tuple[int, float]] = []
        self.failures: list[tuple[int, float, int]] = []
        self.connected_nodes: list[int] = []
        self.sent: list[tuple[int, int, int]] = []

    def connect_attempt(self, node_id: int, now_ms: float) -> None:
        self.attempts.append((node_id, now_ms))

    def connect_failed(self, node_id: int, now_ms: float, backoff_ms: int) -> None:
        self.failures.append((node_id, now_ms, backoff_ms))

    def connected(self, node_id: int, now_ms: float) -> None:
        self.connected_nodes.append(node_id)

    def request_sent(self, node_id: int, api_key: int, api_version: int, now_ms: float) -> None:
        self.sent.append((node_id, api_key, api_version))


def _names(prefix: str, count: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"{prefix}-{run}-{i}" for i in range(count)]


def _topics_seen_by_librdkafka(bootstrap: str) -> dict[str, int]:
    metadata = ConfluentAdmin({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


async def test_create_and_delete_topics_through_the_gateway(gateway: BackgroundGateway) -> None:
    bootstrap = str(gateway.bootstrap)
    names = _names("admin", 3)
    events = Recorder()
    async with AdminClient(bootstrap, events=events) as admin:
        created = await admin.create_topics([NewTopic(n, 4, 1) for n in names])
        assert dict(created) == dict.fromkeys(names)
        seen = _topics_seen_by_librdkafka(bootstrap)
        assert {n: seen.get(n) for n in names} == dict.fromkeys(names, 4)

        again = await admin.create_topics([NewTopic(names[0], 1, 1)])
        error = again[names[0]]
        assert error is not None and error.name == "TOPIC_ALREADY_EXISTS"
        with pytest.raises(type(error)):
            again.raise_on_error()

        missing = f"missing-{uuid.uuid4().hex[:8]}"
        deleted = await admin.delete_topics([*names, missing])
        assert deleted.succeeded == names
        assert deleted.errors[missing].name == "UNKNOWN_TOPIC_OR_PARTITION"
    seen = _topics_seen_by_librdkafka(bootstrap)
    assert not set(names) & set(seen)

    # Bootstrap (-1) for metadata, then the controller through its gateway broker port.
    assert events.connected_nodes == [-1, TANSU_NODE_ID]
    controller_calls = {(k, v) for node, k, v in events.sent if node == TANSU_NODE_ID}
    # The highest versions both the client and the gateway (in front of tansu) speak.
    assert controller_calls == {(api_keys.CREATE_TOPICS, 7), (api_keys.DELETE_TOPICS, 6)}


async def test_create_partitions_reports_a_broker_without_the_api(
    gateway: BackgroundGateway,
) -> None:
    # tansu has no CreatePartitions, so the gateway does not advertise it.
    (name,) = _names("grow", 1)
    async with AdminClient(str(gateway.bootstrap)) as admin:
        result = await admin.create_partitions({name: 8}, timeout_ms=5_000)
    error = result[name]
    assert error is not None
    assert (error.code, error.name) == (35, "UNSUPPORTED_VERSION")


def test_sync_wrapper(gateway: BackgroundGateway) -> None:
    bootstrap = str(gateway.bootstrap)
    names = _names("sync", 2)
    with SyncAdminClient(bootstrap) as admin:
        assert admin.create_topics([NewTopic(n, 1, 1) for n in names]).errors == {}
        assert set(names) <= set(_topics_seen_by_librdkafka(bootstrap))
        assert admin.delete_topics(names).errors == {}


async def test_reconnects_to_a_dead_port_back_off_exponentially() -> None:
    dead = HostPort(LOOPBACK, free_port())  # nothing listens there
    events = Recorder()
    config = AdminConfig((dead,), default_api_timeout_ms=2_500)
    async with AdminClient(config, events=events) as admin:
        result = await admin.create_topics([NewTopic("never", 1, 1)])
        with pytest.raises(KafkaTimeoutError, match="waiting to reconnect to node -1"):
            await admin.describe_client_quotas(timeout_ms=300)
        with pytest.raises(KafkaTimeoutError, match="deadline passed before the call"):
            await admin.describe_client_quotas(timeout_ms=0)
    error = result["never"]
    assert isinstance(error, KafkaTimeoutError)
    assert "Call(callName=createTopics) timed out" in error.message
    assert "Connect call failed" in error.message
    assert events.connected_nodes == []
    backoffs = [backoff for _node, _at, backoff in events.failures]
    assert len(backoffs) >= 5
    for failure, backoff in enumerate(backoffs[:-1]):
        nominal = 50 * 2 ** min(failure, 4.321928094887363)  # log2(1000 / 50)
        assert 0.8 * nominal - 1 <= backoff <= min(1.2 * nominal, 1000)
    # Never earlier than the backoff allowed (asyncio may wake within a clock tick).
    attempts = [at for _node, at in events.attempts]
    pairs = zip(events.failures, attempts[1:], strict=False)
    for (_node, failed_at, backoff), next_attempt in pairs:
        assert next_attempt - failed_at >= backoff - 1


async def test_the_call_deadline_bounds_connection_setup(
    start_gateway: Callable[..., BackgroundGateway],
) -> None:
    # An upstream that takes connections (the kernel completes them into the backlog) and
    # never answers: the gateway holds ApiVersions, and the call gives up at its own deadline.
    with socket.socket() as silent:
        silent.bind((LOOPBACK, 0))
        silent.listen(16)
        gateway = start_gateway(f"{LOOPBACK}:{silent.getsockname()[1]}")
        events = Recorder()
        async with AdminClient(str(gateway.bootstrap), events=events) as admin:
            result = await admin.create_topics([NewTopic("never", 1, 1)], timeout_ms=1_000)
    error = result["never"]
    assert isinstance(error, KafkaTimeoutError)
    assert "timed out waiting for the response to api_versions v4 to node -1" in error.message
    assert [node for node, _at in events.attempts] == [-1]
    assert events.connected_nodes == []
