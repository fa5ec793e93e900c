"""Gateway memory under connection load (issue 14): RSS with and without the resource bounds.

    python benchmarks/connection_load.py [--seconds 60] [--idle 2000] [--tricklers 200] [--full 4]

Starts an embedded tansu broker, then, once per mode, a ``quotagate serve`` process in front of
it (loopback only) and loads it from this process (uvloop):

* ``--idle`` connections that connect and then send nothing;
* ``--tricklers`` connections each sending a frame that declares ``--trickle-frame-mib`` MiB,
  ``--trickle-chunk`` bytes every 10 ms (so it never completes within the run); one the
  gateway closes is reopened at once, as a persistent attacker would;
* ``--full`` connections each sending, over and over, one frame of socket.request.max.bytes
  (100 MiB) as fast as loopback takes it; its header names an unknown API, so the gateway
  reads it whole, then closes the connection, and the sender reconnects;
* one probe connection sending a small ApiVersions request every 100 ms, one at a time, whose
  round trips show what the load does to a well-behaved client.

The gateway's VmRSS (``/proc/<pid>/status``) and its pool gauge (``/metrics``) are sampled
every 0.5 s. Modes: ``unbounded`` (``queued.max.request.bytes = -1``, no partial-frame
timeout: what the gateway did before issue 14, apart from the idle clock) and ``bounded``
(the defaults: a 512 MiB pool, ``frame.read.timeout.ms`` 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import uvloop

from quotagate.gateway.embedded import LOOPBACK, TansuBroker, free_port

TANSU_NODE_ID = 111
MIB = 1 << 20
FULL_FRAME_BYTES = 100 * MIB  # socket.request.max.bytes, Kafka's default
UNKNOWN_API = 32_000
TICK_S = 0.01

MODES = {
    "unbounded": "queued.max.request.bytes = -1\nframe.read.timeout.ms = 2147483647\n",
    "bounded": "",  # the defaults
}


@dataclass
class Sample:
    t: float
    rss_mib: float
    pool_mib: float | None


@dataclass
class ModeResult:
    mode: str
    baseline_mib: float = 0.0
    idle_mib: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    hwm_mib: float = 0.0
    trickled_mib: float = 0.0
    tricklers_closed: int = 0
    full_frames: int = 0
    full_wait_s: list[float] = field(default_factory=list)
    probe_s: list[float] = field(default_factory=list)
    probe_pending_s: float = 0.0
    closed_reasons: dict[str, int] = field(default_factory=dict)
    tracebacks: int = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="load phase per mode")
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--tricklers", type=int, default=200)
    parser.add_argument("--trickle-frame-mib", type=int, default=50)
    parser.add_argument("--trickle-chunk", type=int, default=1000, help="bytes per 10 ms")
    parser.add_argument("--full", type=int, default=4)
    parser.add_argument("--modes", default="unbounded,bounded")
    args = parser.parse_args()

    results = []
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as workdir:
        for mode in args.modes.split(","):
            print(f"mode {mode}: starting", file=sys.stderr)
            results.append(_run_mode(mode, broker.bootstrap, Path(workdir), args))
    _report(results, args)


def _run_mode(mode: str, upstream: str, workdir: Path, args: argparse.Namespace) -> ModeResult:
    port, metrics_port = free_port(), free_port()
    config = workdir / f"{mode}.toml"
    config.write_text(
        f"""
[gateway]
max.connections = 100000
{MODES[mode]}
[upstream]
bootstrap.servers = "{upstream}"
[[listeners]]
name = "PLAINTEXT"
listen = "{LOOPBACK}:{port}"
broker.port.start = {free_port()}
broker.node.id.start = {TANSU_NODE_ID}
broker.port.count = 1
[metrics]
listen = "{LOOPBACK}:{metrics_port}"
[store]
path = "{workdir / (mode + ".db")}"
[log]
level = "INFO"
""",
        encoding="utf-8",
    )
    log_path = workdir / f"{mode}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "quotagate"), "serve", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            result = ModeResult(mode)
            uvloop.run(_load(process.pid, port, metrics_port, result, args))
            result.hwm_mib = _status_kib(process.pid, "VmHWM") / 1024
        finally:
            process.terminate()
            process.wait(60)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    result.tracebacks = text.count("Traceback")
    for line in text.splitlines():
        for event in ("connection_closed", "protocol_error"):
            if f"event={event} " in line and " reason=" in line:
                reason = line.split(" reason=", 1)[1].lstrip('"').split(":")[0].split(" ")[0]
                key = f"{event}: {reason}"
                result.closed_reasons[key] = result.closed_reasons.get(key, 0) + 1
    return result


async def _load(
    pid: int, port: int, metrics_port: int, result: ModeResult, args: argparse.Namespace
) -> None:
    await _wait_until_serving(port)
    start = time.monotonic()
    result.baseline_mib = _rss_mib(pid)
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample(pid, metrics_port, start, result, stop))

    idle: list[asyncio.StreamWriter] = []
    for _ in range(args.idle):
        _, writer = await asyncio.open_connection(LOOPBACK, port)
        idle.append(writer)
    await _wait_for_metric(metrics_port, "quotagate_connections", args.idle)
    await asyncio.sleep(2.0)  # let the gateway settle its upstream connections
    result.idle_mib = _rss_mib(pid)
    print(f"  {args.idle} idle connections open", file=sys.stderr)

    tricklers = asyncio.create_task(_trickle(port, result, args, stop))
    full = [asyncio.create_task(_send_full_frames(port, result, stop)) for _ in range(args.full)]
    probe = asyncio.create_task(_probe(port, result, stop))
    await asyncio.sleep(args.seconds)
    stop.set()
    await asyncio.gather(tricklers, *full, probe, sampler)
    for writer in idle:
        writer.close()


async def _wait_until_serving(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            _, writer = await asyncio.open_connection(LOOPBACK, port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _trickle(
    port: int, result: ModeResult, args: argparse.Namespace, stop: asyncio.Event
) -> None:
    prefix = struct.pack(">i", args.trickle_frame_mib * MIB)
    chunk = b"\x00" * args.trickle_chunk
    writers: list[asyncio.StreamWriter | None] = [None] * args.tricklers
    pending: set[int] = set()

    async def reopen(index: int) -> None:
        _, writer = await asyncio.open_connection(LOOPBACK, port)
        writer.write(prefix)
        writers[index] = writer
        pending.discard(index)

    for index in range(args.tricklers):
        await reopen(index)
    sent = 0
    while not stop.is_set():
        for index, writer in enumerate(writers):
            if writer is None or index in pending:
                continue
            if writer.transport.is_closing():
                result.tricklers_closed += 1
                writers[index] = None
                pending.add(index)
                asyncio.get_running_loop().create_task(reopen(index))
            elif not writer.transport.get_write_buffer_size():  # the gateway is reading
                writer.write(chunk)
                sent += len(chunk)
        await asyncio.sleep(TICK_S)
    result.trickled_mib = sent / MIB
    for writer in writers:
        if writer is not None:
            writer.close()


async def _send_full_frames(port: int, result: ModeResult, stop: asyncio.Event) -> None:
    header = struct.pack(">hhih", UNKNOWN_API, 0, 1, -1)
    frame = struct.pack(">i", FULL_FRAME_BYTES) + header + bytes(FULL_FRAME_BYTES - len(header))
    while not stop.is_set():
        started = time.monotonic()
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        writer.write(frame)
        with contextlib.suppress(ConnectionError):
            while not stop.is_set():
                try:
                    if not await asyncio.wait_for(reader.read(65536), 0.5):
                        break
                except TimeoutError:
                    continue
            else:
                writer.close()
                return
        writer.close()
        result.full_frames += 1
        result.full_wait_s.append(time.monotonic() - started)


async def _probe(port: int, result: ModeResult, stop: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    stopped = asyncio.create_task(stop.wait())
    correlation_id = 0
    while not stop.is_set():
        correlation_id += 1
        # ApiVersions v0, no client id: 14 bytes.
        writer.write(struct.pack(">ihhih", 10, 18, 0, correlation_id, -1))
        started = time.monotonic()
        answer = asyncio.create_task(_read_frame(reader))
        await asyncio.wait({answer, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            result.probe_pending_s = time.monotonic() - started
            break
        answer.result()
        result.probe_s.append(time.monotonic() - started)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(stopped), 0.1)
    writer.close()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = await reader.readexactly(4)
    return await reader.readexactly(struct.unpack(">i", size)[0])


async def _sample(
    pid: int, metrics_port: int, start: float, result: ModeResult, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        pool = await asyncio.to_thread(_metric, metrics_port, "quotagate_memory_pool_used_bytes")
        result.samples.append(
            Sample(
                time.monotonic() - start,
                _rss_mib(pid),
                None if pool is None else pool / MIB,
            )
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


async def _wait_for_metric(metrics_port: int, name: str, value: float) -> None:
    deadline = time.monotonic() + 120
    while (await asyncio.to_thread(_metric, metrics_port, name)) != value:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} never reached {value}")
        await asyncio.sleep(0.2)


def _metric(metrics_port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    total = None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
    return total


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def _rss_mib(pid: int) -> float:
    return _status_kib(pid, "VmRSS") / 1024


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _peak(result: ModeResult) -> float:
    return max(s.rss_mib for s in result.samples)


def _report(results: list[ModeResult], args: argparse.Namespace) -> None:
    print(
        f"\n{args.idle} idle connections, {args.tricklers} tricklers "
        f"({args.trickle_frame_mib} MiB frames, {args.trickle_chunk} B / 10 ms each), "
        f"{args.full} full-frame ({FULL_FRAME_BYTES // MIB} MiB) senders, {args.seconds:.0f} s\n"
    )
    print("| | " + " | ".join(r.mode for r in results) + " |")
    print("|---|" + "---|" * len(results))
    rows = [
        ("RSS at start (MiB)", [f"{r.baseline_mib:.0f}" for r in results]),
        ("RSS with the idle connections (MiB)", [f"{r.idle_mib:.0f}" for r in results]),
        (
            "per idle connection (KiB)",
            [f"{(r.idle_mib - r.baseline_mib) * 1024 / args.idle:.0f}" for r in results],
        ),
        ("peak RSS under load (MiB)", [f"{_peak(r):.0f}" for r in results]),
        ("VmHWM (MiB)", [f"{r.hwm_mib:.0f}" for r in results]),
        ("RSS at the end (MiB)", [f"{r.samples[-1].rss_mib:.0f}" for r in results]),
        (
            "peak pool in use (MiB)",
            [f"{max((s.pool_mib or 0) for s in r.samples):.0f}" for r in results],
        ),
        (
            "bytes trickled (MiB, handed to the client socket)",
            [f"{r.trickled_mib:.0f}" for r in results],
        ),
        ("tricklers closed by the gateway", [str(r.tricklers_closed) for r in results]),
        ("full frames read whole", [str(r.full_frames) for r in results]),
        (
            "longest wait for a full frame (s)",
            [f"{max(r.full_wait_s, default=0):.1f}" for r in results],
        ),
        ("probe round trips answered", [str(len(r.probe_s)) for r in results]),
        ("probe round trip, median (ms)", [_ms(_median(r.probe_s)) for r in results]),
        ("probe round trip, longest (ms)", [_ms(max(r.probe_s, default=0)) for r in results]),
        ("probe request unanswered at the end (s)", [f"{r.probe_pending_s:.1f}" for r in results]),
        ("tracebacks in the log", [str(r.tracebacks) for r in results]),
    ]
    for name, values in rows:
        print(f"| {name} | " + " | ".join(values) + " |")
    print("\nRSS over time (MiB), every 5 s of the run:\n")
    print("| t (s) | " + " | ".join(r.mode for r in results) + " |")
    print("|---|" + "---|" * len(results))
    end = max(r.samples[-1].t for r in results)
    t = 0.0
    while t <= end + 0.01:
        cells = []
        for r in results:
            near = min(r.samples, key=lambda s, t=t: abs(s.t - t))
            pool = "" if near.pool_mib is None else f" (pool {near.pool_mib:.0f})"
            cells.append(f"{near.rss_mib:.0f}{pool}")
        print(f"| {t:.0f} | " + " | ".join(cells) + " |")
        t += 5.0
    for r in results:
        print(f"\n{r.mode}: connections closed by reason: {r.closed_reasons}")


if __name__ == "__main__":
    main()
