"""Resource bounds a Kafka broker has, in the gateway (issue 14): the request-bytes pool
(queued.max.request.bytes), requests queued per connection (queued.max.requests), slow
partial frames (frame.read.timeout.ms) and idle connections (connections.max.idle.ms).

Integration tests use real sockets against a real gateway in front of a real tansu broker;
waits are polls with generous deadlines, never sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.metadata.v1.request import MetadataRequest
from prometheus_client import generate_latest
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.gateway.config import (
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    ConfigError,
    load_config,
    parse_config,
)
from quotagate.gateway.connection import ClientConnection
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.limits.memory_pool import MemoryPool
from quotagate.gateway.stages.exchange import Exchange
from quotagate.gateway.stages.stage import Stage
from quotagate.protocol import api_keys, codec
from support.exchanges import long_poll_fetch
from support.producers import SteadyProducer
from support.raw_socket import connect, read_frame

StartGateway = Callable[..., BackgroundGateway]

# An ApiVersions v0 request made large by its client id: tansu answers it like any other.
BIG_CLIENT_ID = "c" * 32_000
BIG_FRAME = codec.encode_request_frame(ApiVersionsRequest(), 1, BIG_CLIENT_ID)
BIG_SIZE = len(BIG_FRAME) - 4  # the size its prefix declares


# -- the pool, unit -----------------------------------------------------------------------


class _Waiter:
    def __init__(self, pool: MemoryPool, size: int, log: list[str], name: str) -> None:
        self.pool, self.size, self.log, self.name = pool, size, log, name

    def memory_available(self) -> None:
        if self.pool.try_allocate(self.size):
            self.log.append(self.name)
        else:
            self.pool.wait(self)


async def test_the_pool_admits_while_any_memory_is_left() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(60)
    assert pool.try_allocate(60)  # non-strict: 40 were left, so 60 goes through
    assert pool.used == 120
    assert pool.exhausted
    assert not pool.try_allocate(1)
    pool.release(120)
    assert pool.used == 0
    assert pool.try_allocate(1000)  # larger than the whole pool, but the pool was not empty


async def test_released_memory_wakes_waiters_oldest_first_until_exhausted_again() -> None:
    pool = MemoryPool(100)
    woken: list[str] = []
    assert pool.try_allocate(100)
    waiters = [_Waiter(pool, 60, woken, name) for name in ("a", "b", "c")]
    for waiter in waiters:
        pool.wait(waiter)
    pool.wait(waiters[0])  # idempotent
    assert pool.waiting == 3
    pool.release(100)
    assert woken == []  # told on the next turn of the loop, never from inside release()
    await asyncio.sleep(0)
    assert woken == ["a", "b"]  # b went through non-strictly, then the pool was exhausted
    assert pool.waiting == 1
    pool.cancel(waiters[2])
    pool.release(120)
    await asyncio.sleep(0)
    assert woken == ["a", "b"]
    assert pool.waiting == 0


async def test_an_unbounded_pool_counts_but_never_refuses() -> None:
    pool = MemoryPool()
    assert pool.capacity == -1
    for _ in range(1000):
        assert pool.try_allocate(1 << 40)
    assert pool.used == 1000 << 40
    assert not pool.exhausted


# -- configuration ------------------------------------------------------------------------


def test_the_bounds_have_defaults_and_take_kafka_keys() -> None:
    default = parse_config({})
    assert default.queued_max_request_bytes == DEFAULT_QUEUED_MAX_REQUEST_BYTES == 512 << 20
    assert default.queued_max_requests == 500
    assert default.frame_read_timeout_ms == 30_000
    config = parse_config(
        {
            "gateway": {
                "queued.max.request.bytes": -1,
                "queued.max.requests": 1,
                "frame.read.timeout.ms": 5,
            }
        }
    )
    assert config.queued_max_request_bytes == -1
    assert config.queued_max_requests == 1
    assert config.frame_read_timeout_ms == 5
    dotted = parse_config({"gateway": {"queued": {"max": {"request": {"bytes": 1 << 33}}}}})
    assert dotted.queued_max_request_bytes == 1 << 33


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            "[gateway]\nsocket.request.max.bytes = 2000\nqueued.max.request.bytes = 1000\n",
            "queued.max.request.bytes (1000) is below socket.request.max.bytes (2000)",
        ),
        (
            "[gateway]\nsocket.request.max.bytes = 1073741824\n",
            "queued.max.request.bytes (536870912, the default) is below",
        ),
        ("[gateway]\nqueued.max.request.bytes = 0\n", "write -1 (unbounded) or a number"),
        ("[gateway]\nqueued.max.request.bytes = -5\n", "write -1 (unbounded) or a number"),
        ('[gateway]\nqueued.max.request.bytes = "1g"\n', "is not an integer"),
        ("[gateway]\nqueued.max.requests = 0\n", "out of range"),
        ("[gateway]\nqueued.max.request = 5\n", 'did you mean "queued.max.requests"'),
        ('[gateway]\nframe.read.timeout.ms = "30s"\n', "is not an integer"),
        ("[gateway]\nframe.read.timeout.ms = 0\n", "out of range"),
        ("[gateway]\nframe.read.timout.ms = 5\n", 'did you mean "frame.read.timeout.ms"'),
    ],
)
def test_bad_bound_values_say_what_and_how_to_fix(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert message in str(caught.value)
    result = CliRunner().invoke(app, ["serve", "--config", str(path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


# -- live helpers -------------------------------------------------------------------------


def _correlation_id(response: bytes) -> int:
    value: int = struct.unpack_from(">i", response, 4)[0]
    return value


def _is_closed(sock: socket.socket) -> bool:
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True


def _connections(gateway: BackgroundGateway) -> list[ClientConnection]:
    return list(gateway.gateway.services.connections)


def _metric(gateway: BackgroundGateway, line_start: str) -> float | None:
    text = generate_latest(gateway.gateway.metrics.registry).decode()
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


class Trickler:
    """Sends one frame a few bytes at a time from a thread, until told to stop or closed."""

    def __init__(self, sock: socket.socket, frame: bytes, step: int, pause_s: float) -> None:
        self._sock, self._frame, self._step, self._pause_s = sock, frame, step, pause_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _run(self) -> None:
        try:
            while self.sent < len(self._frame) and not self._stop.is_set():
                self._sock.sendall(self._frame[self.sent : self.sent + self._step])
                self.sent += self._step
                self._stop.wait(self._pause_s)  # pacing the trickle, not synchronisation
        except OSError:
            pass  # closed by the gateway

    def __enter__(self) -> Trickler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def small_pool_gateway(
    tansu: TansuBroker, start_gateway: StartGateway
) -> Iterator[BackgroundGateway]:
    # The pool holds exactly one BIG_FRAME: while one is reserved, the pool is exhausted.
    gateway = start_gateway(
        tansu.bootstrap,
        socket_request_max_bytes=BIG_SIZE,
        queued_max_request_bytes=BIG_SIZE,
    )
    yield gateway
    gateway.stop()


# -- queued.max.request.bytes -------------------------------------------------------------


@pytest.mark.integration
def test_an_exhausted_pool_makes_another_connection_wait_until_the_first_is_answered(
    small_pool_gateway: BackgroundGateway, wait_for: Any
) -> None:
    gateway = small_pool_gateway
    pool = gateway.gateway.services.memory_pool
    first, second = connect(gateway), connect(gateway)
    with first, second:
        first.sendall(BIG_FRAME[:1000])
        wait_for(lambda: pool.used == len(BIG_FRAME), 30, "the big frame's reservation")
        assert _metric(gateway, "quotagate_memory_pool_used_bytes") == len(BIG_FRAME)
        second.sendall(codec.encode_request_frame(ApiVersionsRequest(), 2, "small"))
        wait_for(lambda: pool.waiting == 1, 30, "the second connection to wait for memory")
        assert _metric(gateway, "quotagate_memory_pool_waiting_connections") == 1
        first.sendall(BIG_FRAME[1000:])
        assert _correlation_id(read_frame(first)) == 1
        assert _correlation_id(read_frame(second)) == 2
        wait_for(lambda: pool.used == 0 and pool.waiting == 0, 30, "the pool to empty")


@pytest.mark.integration
def test_a_connection_waiting_for_memory_is_not_read(
    small_pool_gateway: BackgroundGateway, wait_for: Any
) -> None:
    # The waiting connection sends at once, while the gateway is still opening its upstream
    # connection: the pause asked for in connection_made (which uvloop would lose) and the
    # memory pause must both really stop reading, leaving at most one read buffered.
    gateway = small_pool_gateway
    pool = gateway.gateway.services.memory_pool
    with connect(gateway) as first:
        first.sendall(BIG_FRAME[:100])
        wait_for(lambda: pool.used == len(BIG_FRAME), 30, "the big frame's reservation")
        with connect(gateway) as second:
            payload = BIG_FRAME * 64  # 2 MiB of frames, far more than one read
            second.sendall(payload[:65536])  # at once: the kernel takes it before any read
            second.settimeout(0.5)
            sender = threading.Thread(target=_send_until_blocked, args=(second, payload[65536:]))
            sender.start()
            wait_for(lambda: pool.waiting == 1, 30, "the second connection to wait for memory")
            (waiting,) = [c for c in _connections(gateway) if c.reserved == 0]
            transport = waiting._transport
            assert transport is not None and not transport.is_reading()
            assert waiting._reader.buffered <= 256_000
            first.sendall(BIG_FRAME[100:])
            assert _correlation_id(read_frame(first)) == 1
            sender.join(60)
    wait_for(lambda: pool.used == 0 and pool.waiting == 0, 30, "the pool to empty")


def _send_until_blocked(sock: socket.socket, payload: bytes) -> None:
    with contextlib.suppress(OSError):  # timeout once the kernel buffers are full, or closed
        sock.sendall(payload)


@pytest.mark.integration
def test_a_frame_larger_than_what_is_left_is_admitted_not_deadlocked(
    small_pool_gateway: BackgroundGateway, wait_for: Any
) -> None:
    gateway = small_pool_gateway
    pool = gateway.gateway.services.memory_pool
    small = codec.encode_request_frame(ApiVersionsRequest(), 3, "small")
    first, second = connect(gateway), connect(gateway)
    with first, second:
        first.sendall(small[:6])  # reserves len(small), a little of the pool
        wait_for(lambda: pool.used == len(small), 30, "the small frame's reservation")
        second.sendall(BIG_FRAME)  # more than what is left: admitted, the pool goes over
        assert _correlation_id(read_frame(second)) == 1
        first.sendall(small[6:])
        assert _correlation_id(read_frame(first)) == 3
        wait_for(lambda: pool.used == 0, 30, "the pool to empty")


@pytest.mark.integration
def test_closing_a_connection_releases_what_it_reserved(
    small_pool_gateway: BackgroundGateway, wait_for: Any
) -> None:
    gateway = small_pool_gateway
    pool = gateway.gateway.services.memory_pool
    with connect(gateway) as first, connect(gateway) as second:
        first.sendall(BIG_FRAME[:100])
        wait_for(lambda: pool.used == len(BIG_FRAME), 30, "the big frame's reservation")
        second.sendall(BIG_FRAME)
        wait_for(lambda: pool.waiting == 1, 30, "the second connection to wait")
        first.close()
        assert _correlation_id(read_frame(second)) == 1
    wait_for(lambda: pool.used == 0 and not _connections(gateway), 30, "everything released")


# -- frame.read.timeout.ms and connections.max.idle.ms ------------------------------------


@pytest.mark.integration
def test_a_trickled_frame_past_its_timeout_is_closed_while_a_producer_keeps_going(
    tansu: TansuBroker,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = start_gateway(tansu.bootstrap, frame_read_timeout_ms=500)
    pool = gateway.gateway.services.memory_pool
    bootstrap = str(gateway.bootstrap)
    frame = struct.pack(">i", 50 << 20) + b"\x00" * (50 << 20)  # declares 50 MiB
    with SteadyProducer(bootstrap) as steady:
        wait_for(lambda: steady.acked > 0, 30, "the steady producer to get going")
        with connect(gateway) as sock, Trickler(sock, frame, 64, 0.02) as trickler:
            wait_for(lambda: pool.used >= 50 << 20, 30, "the trickled frame's reservation")
            acked_before = steady.acked
            wait_for(
                lambda: "frame.read.timeout.ms exceeded" in caplog.text,
                30,
                "the partial frame to time out",
            )
            assert _is_closed(sock)
            assert trickler.sent < len(frame)
        wait_for(lambda: pool.used < 50 << 20, 30, "the reservation to be released")
        wait_for(lambda: steady.acked > acked_before + 20, 30, "the producer to keep going")
    assert not steady.errors
    line = next(r.getMessage() for r in caplog.records if "frame.read.timeout" in r.getMessage())
    assert line.startswith("event=connection_closed ")
    assert f"of {len(frame)} bytes arrived in" in line
    closed = 'quotagate_connections_closed_total{reason="frame.read.timeout.ms exceeded"}'
    assert _metric(gateway, closed) == 1
    gateway.stop()


@pytest.mark.integration
def test_a_trickler_is_idle_even_while_it_sends_bytes(
    tansu: TansuBroker,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    # Bytes of a frame that never completes are not activity: connections.max.idle.ms holds
    # even when frame.read.timeout.ms is far away.
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = start_gateway(
        tansu.bootstrap, connections_max_idle_ms=400, frame_read_timeout_ms=600_000
    )
    frame = struct.pack(">i", 1 << 20) + b"\x00" * (1 << 20)
    with connect(gateway) as sock, Trickler(sock, frame, 16, 0.02) as trickler:
        wait_for(lambda: "connections.max.idle.ms exceeded" in caplog.text, 30, "the idle close")
        assert _is_closed(sock)
        assert trickler.sent < len(frame)
    gateway.stop()


@pytest.mark.integration
def test_many_idle_connections_are_closed(
    tansu: TansuBroker, start_gateway: StartGateway, wait_for: Any
) -> None:
    gateway = start_gateway(tansu.bootstrap, connections_max_idle_ms=2000)
    sockets: list[socket.socket] = []
    try:
        for index in range(300):
            sock = connect(gateway)
            sockets.append(sock)
            if index % 2:  # half of them do something first
                sock.sendall(codec.encode_request_frame(ApiVersionsRequest(), index, "idle"))
                assert _correlation_id(read_frame(sock)) == index
        for sock in sockets:
            assert _is_closed(sock)
        wait_for(lambda: not _connections(gateway), 30, "every connection to be gone")
        closed = _metric(
            gateway, 'quotagate_connections_closed_total{reason="connections.max.idle.ms exceeded"}'
        )
        assert closed == 300
    finally:
        for sock in sockets:
            sock.close()
        gateway.stop()


class MuteMetadata(Stage):
    name = "mute-metadata"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.METADATA})

    def on_request(self, exchange: Exchange) -> None:
        exchange.mute(600_000)


@pytest.mark.integration
def test_a_muted_connection_is_not_idle(
    tansu: TansuBroker, start_gateway: StartGateway, wait_for: Any
) -> None:
    gateway = start_gateway(tansu.bootstrap, stages=[MuteMetadata()], connections_max_idle_ms=300)
    with connect(gateway) as muted:
        muted.sendall(codec.encode_request_frame(MetadataRequest(topics=()), 1, "muted"))
        assert _correlation_id(read_frame(muted)) == 1
        (connection,) = _connections(gateway)
        # A connection opened after the muted one went quiet is closed as idle; had the muted
        # one counted as idle, the same sweep (or an earlier one) would have closed it too.
        with connect(gateway) as control:
            assert _is_closed(control)
        assert not connection.closed
        wait_for(lambda: _connections(gateway) == [connection], 30, "the control to be gone")
        assert not connection.closed


# -- queued.max.requests ------------------------------------------------------------------


@pytest.mark.integration
def test_queued_max_requests_stops_reading_until_a_request_is_answered(
    tansu: TansuBroker, start_gateway: StartGateway, wait_for: Any
) -> None:
    gateway = start_gateway(tansu.bootstrap, queued_max_requests=1)
    topic = f"queued-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": str(gateway.bootstrap)})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    # A fetch on an empty partition waits upstream for max_wait: it is in flight while the
    # requests pipelined behind it stay unread.
    fetch = long_poll_fetch(topic, 1000)
    pipelined = b"".join(
        codec.encode_request_frame(ApiVersionsRequest(), cid, "queued") for cid in range(2, 12)
    )
    with connect(gateway) as sock:
        sock.sendall(codec.encode_request_frame(fetch, 1, "queued") + pipelined)
        port = sock.getsockname()[1]
        wait_for(
            lambda: any(c.info.client_port == port and c.inflight for c in _connections(gateway)),
            30,
            "the fetch in flight",
        )
        (busy,) = [c for c in _connections(gateway) if c.info.client_port == port]
        assert busy.inflight == 1  # the ten ApiVersions behind it were not handled
        assert [_correlation_id(read_frame(sock)) for _ in range(11)] == list(range(1, 12))
    gateway.stop()
