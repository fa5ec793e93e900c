"""The stage interface through a real gateway: local answers, lazy request bodies,
throttle_time on responses and KIP-219 channel muting."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_client_quotas.v1 import request as dcq_request
from kio.schema.describe_client_quotas.v1 import response as dcq_response
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import f64

from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.stages.exchange import Exchange
from quotagate.gateway.stages.stage import Stage
from quotagate.protocol import api_keys, codec
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.throttle_time import get_throttle_time_ms
from support.raw_socket import connect, read_frame

pytestmark = pytest.mark.integration

THROTTLE_MS = 300


class QuotaLikeStage(Stage):
    """Answers DescribeClientQuotas itself, notes created topics, throttles Metadata."""

    name: ClassVar[str] = "test-quota-like"
    request_keys: ClassVar[frozenset[int] | None] = frozenset(
        {api_keys.DESCRIBE_CLIENT_QUOTAS, api_keys.CREATE_TOPICS, api_keys.METADATA}
    )
    response_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.METADATA})
    local_apis: ClassVar[dict[int, range]] = {api_keys.DESCRIBE_CLIENT_QUOTAS: range(0, 2)}

    def __init__(self) -> None:
        self.created: list[str] = []
        self.principals: set[str | None] = set()
        self.throttle_clients: set[str] = set()

    def on_request(self, exchange: Exchange) -> None:
        self.principals.add(exchange.principal)
        if exchange.api_key == api_keys.CREATE_TOPICS:
            self.created.extend(t.name for t in exchange.request_body().topics)
        elif exchange.api_key == api_keys.DESCRIBE_CLIENT_QUOTAS:
            entry = dcq_response.EntryData(
                entity=(dcq_response.EntityData(entity_type="user", entity_name="alice"),),
                values=(dcq_response.ValueData(key="producer_byte_rate", value=f64(1024.0)),),
            )
            exchange.respond(
                dcq_response.DescribeClientQuotasResponse(
                    throttle_time=timedelta(0),
                    error_code=ErrorCode.none,
                    error_message=None,
                    entries=(entry,),
                )
            )

    def on_response(self, exchange: Exchange) -> None:
        if exchange.header.client_id in self.throttle_clients:
            exchange.set_throttle_time_ms(THROTTLE_MS)
            exchange.mute(THROTTLE_MS)


@pytest.fixture(scope="module")
def staged(
    tansu: TansuBroker, start_module_gateway: Callable[..., BackgroundGateway]
) -> tuple[BackgroundGateway, QuotaLikeStage]:
    stage = QuotaLikeStage()
    return start_module_gateway(tansu.bootstrap, stages=[stage]), stage


def _exchange(sock: socket.socket, request: Any, correlation_id: int, client_id: str) -> bytes:
    sock.sendall(codec.encode_request_frame(request, correlation_id, client_id))
    return read_frame(sock)


def test_a_stage_answers_locally_and_its_api_is_advertised(
    staged: tuple[BackgroundGateway, QuotaLikeStage],
) -> None:
    gateway, stage = staged
    with connect(gateway) as sock:
        versions = codec.decode_response(
            _exchange(
                sock,
                ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                1,
                "local",
            ),
            18,
            3,
        )
        advertised = {a.api_key: (a.min_version, a.max_version) for a in versions.api_keys}
        assert advertised[api_keys.DESCRIBE_CLIENT_QUOTAS] == (0, 1)  # tansu has no such API
        request = dcq_request.DescribeClientQuotasRequest(components=(), strict=False)
        answer = codec.decode_response(_exchange(sock, request, 2, "local"), 48, 1)
    assert answer.entries[0].entity[0].entity_name == "alice"
    assert stage.principals == {"User:ANONYMOUS"}


def test_a_stage_reads_request_bodies_it_asks_for(
    staged: tuple[BackgroundGateway, QuotaLikeStage],
) -> None:
    gateway, stage = staged
    topic = f"staged-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": str(gateway.bootstrap)})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    assert topic in stage.created
    assert topic in admin.list_topics(timeout=30).topics  # the request still went upstream


def test_throttle_time_is_written_and_the_channel_muted(
    staged: tuple[BackgroundGateway, QuotaLikeStage],
) -> None:
    gateway, stage = staged
    stage.throttle_clients.add("slow")
    request = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with connect(gateway) as sock:
        first = _exchange(sock, request, 1, "slow")
        answered = time.monotonic()
        assert get_throttle_time_ms(first, 3, 12) == THROTTLE_MS
        # The next request is not even read until the mute has expired.
        second = _exchange(sock, request, 2, "slow")
        assert time.monotonic() - answered >= THROTTLE_MS / 1000 * 0.9
        assert get_throttle_time_ms(second, 3, 12) == THROTTLE_MS
    with connect(gateway) as sock:
        assert get_throttle_time_ms(_exchange(sock, request, 1, "fast"), 3, 12) == 0


class _Lifecycle(Stage):
    name: ClassVar[str] = "test-lifecycle"

    def __init__(self) -> None:
        self.events: list[str] = []

    async def start(self) -> None:
        self.events.append("start")

    async def close(self) -> None:
        self.events.append("close")


def test_a_failed_start_closes_the_stages_it_started(
    start_gateway: Callable[..., BackgroundGateway], tansu: TansuBroker
) -> None:
    stage = _Lifecycle()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = HostPort("127.0.0.1", taken.getsockname()[1])
        with pytest.raises(OSError):
            start_gateway(tansu.bootstrap, stages=[stage], listener={"listen": listen})
    assert stage.events == ["start", "close"]
