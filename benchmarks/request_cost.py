"""The gateway's own Python cost per request: the real connection and stage chain, no sockets.

    .venv/bin/python benchmarks/request_cost.py [--requests 20000] [--repeats 7]
    .venv/bin/python benchmarks/request_cost.py --profile produce:on+usage

A :class:`ClientConnection` of a real :class:`Gateway` (its built-in stages, and the quota
plug-in where the mode has one) is fed request frames as its client transport would deliver
them, and the matching response frames as its upstream link would. Both transports are
in-memory stand-ins that accept writes and drop them: no request goes through a socket
(the listener listens only so that a Metadata response can open the broker's port), there
is no syscall and no event-loop turn per request, so the figure is the CPU time of the
gateway's own Python (framing, header, stages, quota engine, metrics, usage events) and
travels between machines better than a live run does. What the kernel adds on a real
connection is not in it.

Per API (Produce v9, 215 B, acks=1, one topic and partition; Fetch v12 of one partition
answered with 1 KiB of records; Metadata v12 of every topic, three partitions, one broker)
and per mode:

* ``bare``: no quota plug-in, the built-in stages only (the relay's floor);
* ``off``: the quota plug-in with nothing configured;
* ``on``: produce, fetch, request and mutation quotas for every client (a default client-id
  entity), far above what the run reaches, as a production gateway has them;
* ``on+usage``: ``on`` and usage events written to Parquet in a temporary directory;
* ``on+shadow``: ``on`` and one shadow quota (``shadow.producer_byte_rate`` of every client):
  every request is decided a second time, on the shadow set (docs/quotas.md);
* ``on+shadows``: ``on`` and the four shadow quotas of every client, the shadow set's worst.

Each repeat sends ``--requests`` requests one after the other on one connection (each
answered before the next is read) and reports CPU time per request, best of ``--repeats``:
``loop`` is the thread that runs the connection (time.thread_time_ns), ``all`` the whole
process (time.process_time_ns), which with usage events includes the writer thread; a repeat
waits until the writer has written every event of the repeat before it stops the clock.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import pstats
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import uvloop
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from passthrough import every_client_quotas
from quotagate.enforcement import QuotaEnforcement, QuotaRuntime, QuotaSettings
from quotagate.enforcement.settings import UsageSettings
from quotagate.gateway import Gateway, GatewayConfig, ListenerConfig, Plugin
from quotagate.gateway.auth.listener import listener_authenticators
from quotagate.gateway.connection import ClientConnection
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.gateway.upstream import link as link_module
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.kio_nested import build, nested
from quotagate.quota.shadow_keys import shadow_key
from quotagate.store.quotas import Change

CLIENT_ID = "bench-client"
CORRELATION_ID = 7
PRODUCE_FRAME_BYTES = 215
NODE_ID = 111
NO_ERROR = ErrorCode(0)
MODES = ("bare", "off", "on", "on+usage", "on+shadow", "on+shadows")


class _NullTransport(asyncio.Transport):
    """Accepts whatever the connection writes and drops it; always reading, never full."""

    def __init__(self) -> None:
        super().__init__()
        self._reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def writelines(self, list_of_data: Any) -> None:
        pass

    def is_reading(self) -> bool:
        return self._reading

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        self._reading = True

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


@dataclass(frozen=True)
class Api:
    name: str
    request: bytes
    response: bytes


def record_batch(value_bytes: int) -> bytes:
    """A v2 record batch of one record (a broker validates what it stores)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"v" * value_bytes, headers=[])
    return bytes(builder.build())


def produce_api() -> Api:
    version = 9
    schema = api_table.request_schema(api_keys.PRODUCE, version)

    def request(value_bytes: int) -> bytes:
        body = build(
            schema,
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                build(
                    nested(schema, "TopicProduceData"),
                    name="bench-topic",
                    partition_data=(
                        build(
                            nested(schema, "PartitionProduceData"),
                            index=0,
                            records=record_batch(value_bytes),
                        ),
                    ),
                ),
            ),
        )
        return codec.encode_request_frame(body, CORRELATION_ID, CLIENT_ID)

    # The value that makes the whole frame 215 B (varint lengths grow with it: step down).
    value_bytes = PRODUCE_FRAME_BYTES - len(request(0))
    while len(frame := request(value_bytes)) > PRODUCE_FRAME_BYTES:
        value_bytes -= 1
    assert len(frame) == PRODUCE_FRAME_BYTES, len(frame)
    response_schema = api_table.response_schema(api_keys.PRODUCE, version)
    response = build(
        response_schema,
        responses=(
            build(
                nested(response_schema, "TopicProduceResponse"),
                name="bench-topic",
                partition_responses=(
                    build(
                        nested(response_schema, "PartitionProduceResponse"),
                        index=0,
                        error_code=NO_ERROR,
                        base_offset=1234,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    ),
                ),
            ),
        ),
        throttle_time=datetime.timedelta(0),
    )
    return Api("Produce", frame, codec.encode_response_frame(response, CORRELATION_ID))


def fetch_api() -> Api:
    version = 12
    schema = api_table.request_schema(api_keys.FETCH, version)
    body = build(
        schema,
        cluster_id=None,
        replica_id=-1,
        replica_state=None,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            build(
                nested(schema, "FetchTopic"),
                topic="bench-topic",
                partitions=(
                    build(
                        nested(schema, "FetchPartition"),
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=1000,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1_048_576,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    response_schema = api_table.response_schema(api_keys.FETCH, version)
    response = build(
        response_schema,
        throttle_time=datetime.timedelta(0),
        error_code=NO_ERROR,
        session_id=0,
        responses=(
            build(
                nested(response_schema, "FetchableTopicResponse"),
                topic="bench-topic",
                partitions=(
                    build(
                        nested(response_schema, "PartitionData"),
                        partition_index=0,
                        error_code=NO_ERROR,
                        high_watermark=2000,
                        last_stable_offset=2000,
                        log_start_offset=0,
                        aborted_transactions=(),
                        preferred_read_replica=-1,
                        records=b"x" * 1024,
                    ),
                ),
            ),
        ),
    )
    return Api(
        "Fetch",
        codec.encode_request_frame(body, CORRELATION_ID, CLIENT_ID),
        codec.encode_response_frame(response, CORRELATION_ID),
    )


def metadata_api() -> Api:
    version = 12
    body = build(
        api_table.request_schema(api_keys.METADATA, version),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    schema = api_table.response_schema(api_keys.METADATA, version)
    partitions = tuple(
        build(
            nested(schema, "MetadataResponsePartition"),
            error_code=NO_ERROR,
            partition_index=index,
            leader_id=NODE_ID,
            leader_epoch=0,
            replica_nodes=(NODE_ID,),
            isr_nodes=(NODE_ID,),
            offline_replicas=(),
        )
        for index in range(3)
    )
    response = build(
        schema,
        throttle_time=datetime.timedelta(0),
        brokers=(
            build(
                nested(schema, "MetadataResponseBroker"),
                node_id=NODE_ID,
                host="broker.internal",
                port=9092,
                rack=None,
            ),
        ),
        cluster_id="bench-cluster",
        controller_id=NODE_ID,
        topics=(
            build(
                nested(schema, "MetadataResponseTopic"),
                error_code=NO_ERROR,
                name="bench-topic",
                topic_id=None,
                is_internal=False,
                partitions=partitions,
                topic_authorized_operations=-2147483648,
            ),
        ),
    )
    return Api(
        "Metadata",
        codec.encode_request_frame(body, CORRELATION_ID, CLIENT_ID),
        codec.encode_response_frame(response, CORRELATION_ID),
    )


APIS: dict[str, Callable[[], Api]] = {
    "produce": produce_api,
    "fetch": fetch_api,
    "metadata": metadata_api,
}


# -- one gateway, one connection ---------------------------------------------------------


class Bench:
    """A gateway of one mode and one client connection through it."""

    def __init__(self, mode: str, usage_dir: Path) -> None:
        listener = ListenerConfig(
            name="PLAINTEXT",
            listen=HostPort(LOOPBACK, 0),
            advertised_host=LOOPBACK,
            broker_port_start=free_port(),
            broker_node_id_start=NODE_ID,
            broker_port_count=1,
        )
        self.listener_config = listener
        config = GatewayConfig(listeners=(listener,), bootstrap_servers=(HostPort(LOOPBACK, 9092),))
        self.runtime: QuotaRuntime | None = None
        plugins: list[Plugin] = []
        if mode != "bare":
            usage = UsageSettings(path=usage_dir) if mode == "on+usage" else UsageSettings()
            self.runtime = QuotaRuntime(QuotaSettings(usage=usage))
            if mode != "off":
                self.runtime.store_sync.alter_client_quotas(
                    every_client_quotas(), "benchmark", "benchmarks/request_cost.py"
                )
            shadows = [Change(c.entity, shadow_key(c.key), c.value) for c in every_client_quotas()]
            if mode in ("on+shadow", "on+shadows"):
                self.runtime.store_sync.alter_client_quotas(
                    shadows[:1] if mode == "on+shadow" else shadows,
                    "benchmark",
                    "benchmarks/request_cost.py",
                )
            plugins.append(QuotaEnforcement(self.runtime))
        self.gateway = Gateway(config, plugins=plugins)
        self.sent = 0
        self.connection: ClientConnection | None = None
        self.upstream: Any = None

    async def start(self) -> None:
        for plugin in self.gateway.plugins:
            await plugin.start()
        for stage in self.gateway.chain.stages:
            await stage.start()
        # Listening, so that a Metadata response can open the broker's port; no request of
        # the benchmark goes through a socket.
        for listener in self.gateway.listeners.values():
            await listener.start()
        links: list[Any] = []

        async def open_upstream(
            pick: Any, factory: Callable[[], asyncio.Protocol], *args: Any
        ) -> tuple[asyncio.Transport, int]:
            link = factory()
            transport = _NullTransport()
            link.connection_made(transport)
            links.append(link)
            return transport, 0

        # The one thing replaced: the upstream connection is an in-memory link.
        with patch.object(link_module, "open_upstream", open_upstream):
            auth = listener_authenticators(self.listener_config, None, None)()
            connection = ClientConnection(
                self.gateway.services, self.listener_config, lambda attempt: None, auth
            )
            connection.connection_made(_NullTransport())
            for _ in range(10):
                await asyncio.sleep(0)
        assert links, "the upstream link did not open"
        self.connection = connection
        self.upstream = links[0]

    def drive(self, api: Api, count: int) -> None:
        assert self.connection is not None
        to_gateway = self.connection.data_received
        from_upstream = self.upstream.data_received
        request, response = api.request, api.response
        for _ in range(count):
            to_gateway(request)
            from_upstream(response)
        self.sent += count

    def wait_for_usage(self) -> None:
        """Until the usage writer has written every event so far (its clock keeps running)."""
        usage = self.runtime.usage if self.runtime is not None else None
        if usage is None:
            return
        # The gateway hands a partial batch over every housekeeping tick; this loop does not
        # turn the event loop, so it asks directly (writers before batching had no flush).
        flush = getattr(usage, "flush", None)
        if flush is not None:
            flush()
        deadline = time.monotonic() + 30
        while usage.written < self.sent and time.monotonic() < deadline:
            time.sleep(0.02)
        if usage.written < self.sent:
            raise RuntimeError(f"usage writer wrote {usage.written} of {self.sent} events")

    async def close(self) -> None:
        if self.connection is not None:
            self.connection.close("benchmark done")
        for stage in self.gateway.chain.stages:
            await stage.close()
        for plugin in reversed(self.gateway.plugins):
            await plugin.close()
        for listener in self.gateway.listeners.values():
            listener.close()


@contextmanager
def _bench(mode: str) -> Iterator[Bench]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Bench(mode, Path(tmp))


async def measure(api: Api, mode: str, requests: int, repeats: int) -> tuple[float, float]:
    """Best (loop µs, all-threads µs) per request over ``repeats``."""
    with _bench(mode) as bench:
        await bench.start()
        try:
            bench.drive(api, min(requests, 2000))  # warm: sensors, caches, first flush
            bench.wait_for_usage()
            loop_best = total_best = float("inf")
            for _ in range(repeats):
                process_start = time.process_time_ns()
                thread_start = time.thread_time_ns()
                bench.drive(api, requests)
                thread_ns = time.thread_time_ns() - thread_start
                bench.wait_for_usage()
                process_ns = time.process_time_ns() - process_start
                loop_best = min(loop_best, thread_ns / requests / 1000)
                total_best = min(total_best, process_ns / requests / 1000)
                await asyncio.sleep(0)  # let the runtime's housekeeping run between repeats
        finally:
            await bench.close()
    return loop_best, total_best


async def profile(api: Api, mode: str, requests: int) -> None:
    with _bench(mode) as bench:
        await bench.start()
        try:
            bench.drive(api, 2000)
            profiler = cProfile.Profile()
            profiler.enable()
            bench.drive(api, requests)
            profiler.disable()
        finally:
            await bench.close()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


async def run(args: argparse.Namespace) -> None:
    if args.profile:
        api_name, _, mode = args.profile.partition(":")
        await profile(APIS[api_name](), mode or "on", args.requests)
        return
    print(
        f"CPU µs per request, best of {args.repeats} repeats of {args.requests} requests "
        "(loop: the connection's thread; all: the process, usage writer included)"
    )
    print()
    print("| API | " + " | ".join(f"{m} loop | {m} all" for m in args.modes) + " |")
    print("|---|" + "---:|---:|" * len(args.modes))
    for api_name in args.apis:
        api = APIS[api_name]()
        cells = []
        for mode in args.modes:
            loop_us, total_us = await measure(api, mode, args.requests, args.repeats)
            cells.append(f"{loop_us:.1f} | {total_us:.1f}")
        print(f"| {api.name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--apis", nargs="+", choices=sorted(APIS), default=list(APIS))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--profile", metavar="API:MODE", help="cProfile one case instead")
    args = parser.parse_args()
    uvloop.run(run(args))  # the gateway's own loop


if __name__ == "__main__":
    main()
