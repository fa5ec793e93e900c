"""Small requests per second and CPU per request: direct broker vs a bare relay vs quotagate.

    .venv/bin/python benchmarks/request_rate.py [--seconds 10] [--rounds 3] [--upstream kafka]

One embedded tansu broker (``--upstream kafka``: one Apache Kafka broker); in front of it,
each in its own process:

* haproxy in TCP mode (one thread) when ``haproxy`` is on the PATH: a bare relay;
* the minimal uvloop relay in this file (``--relay``), which frames both directions and checks
  that responses come back in request order (correlation ids), as any Kafka-aware relay must;
* ``quotagate serve`` with produce, fetch, request and mutation quotas configured for every
  client (far above what the run reaches) and usage events written to Parquet.

A load process (``--load``) opens ``--connections`` connections to one target, keeps
``--in-flight`` Produce v9 requests (215 B, acks=1, one partition: the frame
benchmarks/request_cost.py measures) outstanding on each, and counts responses for
``--seconds``. Rounds alternate over the targets so drift hits all alike; the report is the
median req/s of each target, its ratio to direct, and the CPU time (user + system, from
/proc, every thread and child) the relay process spent per response. The broker and the load
process run on the same cores, so the ratios, not the absolute rates, are the figure.
``--pure`` adds the same gateway running its pure-Python modules (``QUOTAGATE_PURE_PYTHON``)
beside the compiled build. ``--usage-to-kafka`` adds the same gateway publishing its usage
events to the usage topic on the upstream as well (``[usage] sink = ["parquet", "kafka"]``):
what the Kafka usage sink costs per request. ``--baseline-src DIR`` adds a second gateway
importing quotagate from ``DIR`` (the ``src`` directory of another checkout, e.g. from
``git archive``): before and after, in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, cast

import uvloop
from confluent_kafka.admin import AdminClient, NewTopic

import upstreams
from passthrough import configure_quotas, start_gateway
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.protocol.framing import FrameReader
from request_cost import produce_api

TOPIC = "bench-topic"
_CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


# -- the load ------------------------------------------------------------------------------


class _LoadConnection(asyncio.Protocol):
    def __init__(self, frame: bytes, in_flight: int, counts: list[int]) -> None:
        self._head, self._tail = frame[:8], frame[12:]  # correlation id at bytes 8..12
        self._in_flight = in_flight
        self._counts = counts
        self._buffer = bytearray()
        self._correlation = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport.writelines([self._next() for _ in range(self._in_flight)])

    def _next(self) -> bytes:
        self._correlation += 1
        return self._head + struct.pack(">i", self._correlation) + self._tail

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        answered = 0
        offset = 0
        while len(buffer) - offset >= 4:
            size = int.from_bytes(buffer[offset : offset + 4], "big")
            if len(buffer) - offset < 4 + size:
                break
            offset += 4 + size
            answered += 1
        del buffer[:offset]
        if answered and self.transport is not None:
            self._counts[0] += answered
            self.transport.writelines([self._next() for _ in range(answered)])


async def _load(
    host: str, port: int, connections: int, in_flight: int, seconds: float, ca: str | None = None
) -> None:
    """``ca``: connect with TLS, trusting this PEM file (benchmarks/tls_rate.py)."""
    loop = asyncio.get_running_loop()
    frame = produce_api().request
    counts = [0]
    transports = []
    context = ssl.create_default_context(cafile=ca) if ca else None
    for _ in range(connections):
        transport, _protocol = await loop.create_connection(
            lambda: _LoadConnection(frame, in_flight, counts),
            host,
            port,
            ssl=context,
            server_hostname="localhost" if context else None,
        )
        transports.append(transport)
    await asyncio.sleep(1.0)  # warm-up: connections, broker ports, first batches
    start_count, start = counts[0], time.monotonic()
    print("start", flush=True)  # the parent reads the relay's CPU clock now and at the end
    await asyncio.sleep(seconds)
    answered, elapsed = counts[0] - start_count, time.monotonic() - start
    for transport in transports:
        transport.close()
    print(json.dumps({"responses": answered, "seconds": elapsed}), flush=True)


# -- the minimal relay ---------------------------------------------------------------------


class _RelayClient(asyncio.Protocol):
    """Client side: frames requests, remembers their correlation ids, forwards them."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream_address = upstream
        self._reader = FrameReader()
        self._expected: deque[bytes] = deque()
        self._pending: list[bytes] = []
        self.transport: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        upstream, _ = await loop.create_connection(
            lambda: _RelayUpstream(self), *self._upstream_address
        )
        self.upstream = upstream
        if self._pending:
            upstream.writelines(self._pending)
            self._pending = []

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        frames = []
        while (frame := reader.next_frame()) is not None:
            self._expected.append(frame[8:12])
            frames.append(frame)
        if self.upstream is not None:
            self.upstream.writelines(frames)
        else:
            self._pending.extend(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


class _RelayUpstream(asyncio.Protocol):
    """Upstream side: frames responses, checks their order, writes them to the client."""

    def __init__(self, client: _RelayClient) -> None:
        self._client = client
        self._reader = FrameReader(2_147_483_647)

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        client = self._client
        frames = []
        while (frame := reader.next_frame()) is not None:
            if frame[4:8] != client._expected.popleft():
                raise RuntimeError("response out of order")
            frames.append(frame)
        if client.transport is not None:
            client.transport.writelines(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._client.transport is not None:
            self._client.transport.close()


async def _relay(port: int, upstream: tuple[str, int]) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _RelayClient(upstream), LOOPBACK, port)
    print("ready", flush=True)
    await server.serve_forever()


# -- the run -------------------------------------------------------------------------------


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants (all threads)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        own, parent = int(entry.name), int(fields[1])
        if own == pid or _descends(parent, pid):
            total += (int(fields[11]) + int(fields[12])) * _CLOCK_TICK_S
    return total


def _descends(parent: int, ancestor: int) -> bool:
    while parent > 1:
        if parent == ancestor:
            return True
        try:
            stat = Path(f"/proc/{parent}/stat").read_text()
        except OSError:
            return False
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
    return False


def _start_haproxy(upstream: str, workdir: Path) -> tuple[str, subprocess.Popen[bytes]] | None:
    """haproxy in TCP mode in front of ``upstream``, or None when it is not installed."""
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        return None
    port = free_port()
    config = workdir / "haproxy.cfg"
    config.write_text(
        f"global\n  maxconn 4096\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n"
        f"  timeout client 60s\n  timeout server 60s\nlisten relay\n"
        f"  bind {LOOPBACK}:{port}\n  server broker {upstream}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen([haproxy, "-f", str(config)], stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    return f"{LOOPBACK}:{port}", process


def _start_minimal_relay(upstream: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    host, _, upstream_port = upstream.rpartition(":")
    process = subprocess.Popen(
        [sys.executable, __file__, "--relay", str(port), host, upstream_port],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.readline()  # "ready"
    return f"{LOOPBACK}:{port}", process


def _round(
    target: str, args: argparse.Namespace, pid: int | None, ca: str | None = None
) -> tuple[float, float]:
    """(requests per second, relay CPU µs per request) of one load run against ``target``."""
    host, _, port = target.rpartition(":")
    command = [sys.executable, __file__, "--load", host, port, "--seconds", str(args.seconds)]
    command += ["--connections", str(args.connections), "--in-flight", str(args.in_flight)]
    command += ["--tls-ca", ca] if ca else []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as load:
        assert load.stdout is not None
        if load.stdout.readline().strip() != "start":
            raise RuntimeError(f"the load against {target} did not start")
        cpu_before = _cpu_s(pid) if pid is not None else 0.0
        result: dict[str, Any] = json.loads(load.stdout.readline())
        cpu = _cpu_s(pid) - cpu_before if pid is not None else 0.0
    if load.returncode:
        raise RuntimeError(f"the load against {target} failed")
    responses = max(int(result["responses"]), 1)
    return responses / result["seconds"], cpu / responses * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--baseline-src", type=Path, help="also run a gateway from this src")
    parser.add_argument("--pure", action="store_true", help="also run a pure-Python gateway")
    parser.add_argument(
        "--usage-to-kafka", action="store_true", help="also run a gateway with the Kafka sink"
    )
    upstreams.add_option(parser)
    parser.add_argument("--load", nargs=2, metavar=("HOST", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--tls-ca", help=argparse.SUPPRESS)
    parser.add_argument("--relay", nargs=3, metavar=("PORT", "HOST", "UPSTREAM_PORT"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.load:
        host, port = args.load
        uvloop.run(
            _load(host, int(port), args.connections, args.in_flight, args.seconds, args.tls_ca)
        )
        return
    if args.relay:
        port, host, upstream_port = args.relay
        uvloop.run(_relay(int(port), (host, int(upstream_port))))
        return
    with upstreams.started(args.upstream) as broker, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(30)
        relays: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
        haproxy = _start_haproxy(broker.bootstrap, workdir)
        if haproxy is not None:
            relays["haproxy (TCP mode, one thread)"] = haproxy
        relays["minimal uvloop relay (frames, checks order)"] = _start_minimal_relay(
            broker.bootstrap
        )
        store = workdir / "quotas.db"
        configure_quotas(store)
        gateway, gateway_process = start_gateway(
            broker.bootstrap,
            workdir,
            f'[store]\npath = "{store}"\n[usage]\npath = "{workdir / "usage"}"\n',
            node_ids=broker.node_ids,
        )
        gateways = [gateway_process]
        if args.pure:
            pure, pure_process = start_gateway(
                broker.bootstrap,
                workdir,
                f'[store]\npath = "{store}"\n[usage]\npath = "{workdir / "usage-pure"}"\n',
                pure=True,
                node_ids=broker.node_ids,
            )
            gateways.append(pure_process)
        if args.usage_to_kafka:
            sink, sink_process = start_gateway(
                broker.bootstrap,
                workdir,
                f'[store]\npath = "{store}"\n[usage]\npath = "{workdir / "usage-sink"}"\n'
                'sink = ["parquet", "kafka"]\n',
                node_ids=broker.node_ids,
            )
            gateways.append(sink_process)
        if args.baseline_src is not None:
            baseline_store = workdir / "quotas-baseline.db"
            configure_quotas(baseline_store, args.baseline_src.resolve())
            baseline, baseline_process = start_gateway(
                broker.bootstrap,
                workdir,
                f'[store]\npath = "{baseline_store}"\n'
                f'[usage]\npath = "{workdir / "usage-baseline"}"\n',
                args.baseline_src.resolve(),
                node_ids=broker.node_ids,
            )
            gateways.append(baseline_process)
        targets: dict[str, tuple[str, int | None]] = {"direct broker": (broker.bootstrap, None)}
        for name, (address, process) in relays.items():
            targets[name] = (address, process.pid)
        targets["quotagate, quotas and usage events on"] = (gateway, gateway_process.pid)
        if args.pure:
            targets["the same, pure Python (--pure)"] = (pure, pure_process.pid)
        if args.usage_to_kafka:
            targets["the same, usage to Parquet and Kafka"] = (sink, sink_process.pid)
        if args.baseline_src is not None:
            targets["baseline quotagate (--baseline-src)"] = (baseline, baseline_process.pid)
        figures: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in targets}
        try:
            for round_number in range(args.rounds):
                for name, (target, pid) in targets.items():
                    rate, cpu_us = _round(target, args, pid)
                    figures[name][0].append(rate)
                    figures[name][1].append(cpu_us)
                    print(f"round {round_number + 1} {name}: {rate:,.0f} req/s", file=sys.stderr)
        finally:
            for process in [*(p for _, p in relays.values()), *gateways]:
                process.terminate()
                process.wait(30)
    _report(figures, args)


def _report(figures: dict[str, tuple[list[float], list[float]]], args: argparse.Namespace) -> None:
    med = statistics.median
    direct = med(figures["direct broker"][0])
    # The bare relay each CPU figure is set against, round by round: a round's targets run
    # within a minute of each other, so their ratio drifts less than the figures do.
    bare = next((name for name in figures if name.startswith("haproxy")), None)
    bare = bare or next(name for name in figures if name.startswith("minimal"))
    print(
        f"Produce v9, 215 B, acks=1; {args.connections} connections × {args.in_flight} in "
        f"flight; {args.seconds:.0f} s per run, medians of {args.rounds} rounds; "
        f"× bare: CPU per request over {bare}'s, median of the per-round ratios"
    )
    print("| target | req/s | vs direct | relay CPU µs / request | × bare | per round |")
    print("|---|---:|---:|---:|---:|---|")
    for name, (rates, cpus) in figures.items():
        if not any(cpus):
            print(f"| {name} | {med(rates):,.0f} | {med(rates) / direct:.2f} | — | — | — |")
            continue
        ratios = [cpu / base for cpu, base in zip(cpus, figures[bare][1], strict=True)]
        rounds = " / ".join(f"{cpu:.1f}" for cpu in cpus)
        print(
            f"| {name} | {med(rates):,.0f} | {med(rates) / direct:.2f} | {med(cpus):.1f} | "
            f"{med(ratios):.2f} | {rounds} |"
        )


if __name__ == "__main__":
    main()
