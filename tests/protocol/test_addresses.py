"""Address rewriting on kio-built responses listing three brokers."""

from __future__ import annotations

from datetime import timedelta

from kio.schema.describe_cluster.v1 import response as describe_cluster
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import response as coordinator_v3
from kio.schema.find_coordinator.v6 import response as coordinator_v6
from kio.schema.metadata.v12 import response as metadata
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from quotagate.protocol import codec
from quotagate.protocol.addresses import rewrite_addresses

UPSTREAM = {1: ("kafka-1.internal", 9092), 2: ("kafka-2.internal", 9093), 3: ("kafka-3", 9094)}
GATEWAY_PORTS = {1: 19001, 2: 19002, 3: 19003}


class RecordingMapper:
    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, int]] = {}

    def __call__(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        self.seen[node_id] = (host, port)
        return "gateway.local", GATEWAY_PORTS[node_id]


def _round_trip(response: object, api_key: int, version: int) -> object:
    """Encode and decode, as the gateway sees a response coming off the wire."""
    frame = codec.encode_response_frame(response, 1)
    return codec.decode_response(frame, api_key, version)


def test_metadata_brokers_are_all_rewritten() -> None:
    brokers = tuple(
        metadata.MetadataResponseBroker(node_id=BrokerId(n), host=h, port=i32(p), rack=f"rack-{n}")
        for n, (h, p) in UPSTREAM.items()
    )
    response = _round_trip(
        metadata.MetadataResponse(
            throttle_time=timedelta(0),
            brokers=brokers,
            cluster_id="c",
            controller_id=BrokerId(2),
            topics=(),
        ),
        3,
        12,
    )
    mapper = RecordingMapper()
    rewritten = rewrite_addresses(3, response, mapper)
    assert [(b.node_id, b.host, b.port, b.rack) for b in rewritten.brokers] == [
        (1, "gateway.local", 19001, "rack-1"),
        (2, "gateway.local", 19002, "rack-2"),
        (3, "gateway.local", 19003, "rack-3"),
    ]
    assert mapper.seen == UPSTREAM
    assert rewritten.controller_id == 2 and rewritten.cluster_id == "c"
    assert _round_trip(rewritten, 3, 12) == rewritten


def test_find_coordinator_v4_plus_rewrites_every_coordinator_but_failed_ones() -> None:
    found = tuple(
        coordinator_v6.Coordinator(
            key=f"group-{n}",
            node_id=BrokerId(n),
            host=h,
            port=i32(p),
            error_code=ErrorCode.none,
            error_message=None,
        )
        for n, (h, p) in UPSTREAM.items()
    )
    missing = coordinator_v6.Coordinator(
        key="missing",
        node_id=BrokerId(-1),
        host="",
        port=i32(-1),
        error_code=ErrorCode.coordinator_not_available,
        error_message="not yet",
    )
    coordinators = (*found, missing)
    response = _round_trip(
        coordinator_v6.FindCoordinatorResponse(
            throttle_time=timedelta(0), coordinators=coordinators
        ),
        10,
        6,
    )
    rewritten = rewrite_addresses(10, response, RecordingMapper())
    assert [(c.key, c.host, c.port) for c in rewritten.coordinators] == [
        ("group-1", "gateway.local", 19001),
        ("group-2", "gateway.local", 19002),
        ("group-3", "gateway.local", 19003),
        ("missing", "", -1),
    ]


def test_find_coordinator_before_v4_has_one_coordinator() -> None:
    response = coordinator_v3.FindCoordinatorResponse(
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        node_id=BrokerId(3),
        host="kafka-3",
        port=i32(9094),
    )
    rewritten = rewrite_addresses(10, _round_trip(response, 10, 3), RecordingMapper())
    assert (rewritten.node_id, rewritten.host, rewritten.port) == (3, "gateway.local", 19003)


def test_describe_cluster_brokers_are_all_rewritten() -> None:
    brokers = tuple(
        describe_cluster.DescribeClusterBroker(
            broker_id=BrokerId(n), host=h, port=i32(p), rack=None
        )
        for n, (h, p) in UPSTREAM.items()
    )
    response = _round_trip(
        describe_cluster.DescribeClusterResponse(
            throttle_time=timedelta(0),
            error_code=ErrorCode.none,
            cluster_id="c",
            controller_id=BrokerId(1),
            brokers=brokers,
        ),
        60,
        1,
    )
    mapper = RecordingMapper()
    rewritten = rewrite_addresses(60, response, mapper)
    assert {(b.broker_id, b.host, b.port) for b in rewritten.brokers} == {
        (1, "gateway.local", 19001),
        (2, "gateway.local", 19002),
        (3, "gateway.local", 19003),
    }
    assert mapper.seen == UPSTREAM


def test_responses_without_addresses_are_returned_as_is() -> None:
    response = metadata.MetadataResponse(throttle_time=timedelta(0), brokers=(), topics=())
    assert rewrite_addresses(3, response, RecordingMapper()) is response
