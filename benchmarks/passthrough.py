"""Gateway pass-through cost: confluent-kafka straight to a broker vs through quotagate, same run.

    python benchmarks/passthrough.py [--messages 50000] [--rounds 3] [--rate 1000]
                                     [--quotas-usage] [--baseline-src DIR] [--upstream kafka]

Starts an embedded tansu broker (or, ``--upstream kafka``, one Apache Kafka broker) and a
``quotagate serve`` process in front of it (its own process, as in production), then
alternates direct and gateway rounds so drift on a noisy machine hits both sides alike.
Reports medians over rounds: produce and consume throughput (1 KiB messages) and produce
latency percentiles at a fixed moderate rate.

``--quotas-usage`` configures produce, fetch, request and mutation quotas for every client
(far above what the run reaches, as a production gateway has them) and writes usage events
to Parquet; without it the gateway runs with no quota configured and no usage events.
``--pure`` adds the same gateway running its pure-Python modules (``QUOTAGATE_PURE_PYTHON``)
beside the compiled build. ``--baseline-src DIR`` adds a second gateway, same configuration,
importing quotagate from ``DIR`` (the ``src`` directory of another checkout, e.g. from
``git archive``), as one more side of every round: before and after a change, in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import upstreams
from quotagate._compiled import PURE_PYTHON
from quotagate.gateway.embedded import LOOPBACK, free_port, free_ports
from quotagate.store.quotas import Change, QuotaStore

MESSAGE_BYTES = 1024
PARTITIONS = 3
TANSU_NODE_ID = 111
HIGH = 10_000_000_000.0  # bytes per second: configured, never reached


@dataclass
class Figures:
    produce_mb_s: list[float] = field(default_factory=list)
    produce_msg_s: list[float] = field(default_factory=list)
    consume_mb_s: list[float] = field(default_factory=list)
    consume_msg_s: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=1000, help="latency test, messages/s")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--quotas-usage", action="store_true", help="quotas and usage events on")
    parser.add_argument("--baseline-src", type=Path, help="also run a gateway from this src")
    parser.add_argument("--pure", action="store_true", help="also run a pure-Python gateway")
    upstreams.add_option(parser)
    args = parser.parse_args()

    with upstreams.started(args.upstream) as broker, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        stores: dict[Path | None, str] = {}
        gateways: dict[str, subprocess.Popen[bytes]] = {}
        try:
            sides = [("direct", broker.bootstrap)]
            sources: list[tuple[str, Path | None, bool]] = [("gateway", None, False)]
            if args.pure:
                sources.append(("pure-Python gateway", None, True))
            if args.baseline_src is not None:
                sources.append(("baseline gateway", args.baseline_src.resolve(), False))
            for index, (name, src, pure) in enumerate(sources):
                config = ""
                if args.quotas_usage:
                    if src not in stores:
                        store = workdir / f"quotas-{len(stores)}.db"
                        configure_quotas(store, src)
                        stores[src] = f'[store]\npath = "{store}"\n'
                    config = stores[src] + f'[usage]\npath = "{workdir / f"usage-{index}"}"\n'
                bootstrap, gateways[name] = start_gateway(
                    broker.bootstrap, workdir, config, src, pure=pure, node_ids=broker.node_ids
                )
                sides.append((name, bootstrap))
            results = {name: Figures() for name, _ in sides}
            for round_number in range(args.rounds):
                for name, bootstrap in sides:
                    _one_round(bootstrap, args, results[name])
                    print(f"round {round_number + 1} {name}: done", file=sys.stderr)
            _report(results, args)
        finally:
            for process in gateways.values():
                process.terminate()
                process.wait(30)


def every_client_quotas() -> list[Change]:
    """Produce, fetch, request and mutation quotas for every client (a default client-id
    entity), far above any run: what a production gateway has configured."""
    every_client: dict[str, str | None] = {"client-id": None}
    return [
        Change(every_client, "producer_byte_rate", HIGH),
        Change(every_client, "consumer_byte_rate", HIGH),
        Change(every_client, "request_percentage", 100_000.0),
        Change(every_client, "controller_mutation_rate", 1000.0),
    ]


def configure_quotas(store_path: Path, src: Path | None = None) -> None:
    """``every_client_quotas`` in the quota store a gateway will open. ``src``: write it with
    the quotagate of that tree (a store file is at its writer's schema version, which an
    older gateway refuses to open)."""
    if src is None:
        store = QuotaStore.open(store_path)
        store.alter_client_quotas(every_client_quotas(), "benchmark", "benchmarks")
        store.close()
        return
    changes = [(c.entity, c.key, c.value) for c in every_client_quotas()]
    script = (
        "import sys, json\n"
        "from quotagate.store.quotas import Change, QuotaStore\n"
        "store = QuotaStore.open(sys.argv[1])\n"
        "changes = [Change(e, k, v) for e, k, v in json.loads(sys.argv[2])]\n"
        "store.alter_client_quotas(changes, 'benchmark', 'benchmarks')\n"
        "store.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-c", script, str(store_path), json.dumps(changes)]
    subprocess.run(command, env=env, check=True)


def start_gateway(
    upstream: str,
    workdir: Path,
    extra_config: str = "",
    src: Path | None = None,
    *,
    pure: bool = False,
    node_ids: Sequence[int] = (TANSU_NODE_ID,),
    upstream_extra: str = "",
    listener_extra: str = "",
    client_config: dict[str, Any] | None = None,
) -> tuple[str, subprocess.Popen[bytes]]:
    """A ``quotagate serve`` process in front of ``upstream``; returns its bootstrap address
    once it answers metadata. ``extra_config`` is appended TOML (e.g. [quotas], [store]);
    ``src``: import quotagate from there instead of the installed tree; ``pure``: run the
    pure-Python modules even where the compiled ones are built; ``node_ids``: the upstream's
    brokers, one gateway port each; ``upstream_extra`` / ``listener_extra``: more TOML keys of
    ``[upstream]`` / the listener (security); ``client_config``: what a client needs to reach
    the listener besides its address (SASL)."""
    port = free_port()
    first, last = min(node_ids), max(node_ids)
    config = workdir / f"bench-{port}.toml"
    config.write_text(
        f"""
[upstream]
bootstrap.servers = "{upstream}"
{upstream_extra}
[[listeners]]
name = "PLAINTEXT"
listen = "{LOOPBACK}:{port}"
broker.port.start = {free_ports(last - first + 1)}
broker.node.id.start = {first}
broker.port.count = {last - first + 1}
{listener_extra}
[log]
level = "WARNING"
{extra_config}
""",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    if pure:
        env[PURE_PYTHON] = "1"
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "quotagate"), "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        env=env,
    )
    bootstrap = f"{LOOPBACK}:{port}"
    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        try:
            if admin.list_topics(timeout=2).brokers:
                return bootstrap, process
        except Exception:
            if time.monotonic() > deadline:
                process.kill()
                raise
        time.sleep(0.1)


def _one_round(bootstrap: str, args: argparse.Namespace, figures: Figures) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    try:
        seconds = _produce_throughput(bootstrap, topic, args.messages)
        figures.produce_msg_s.append(args.messages / seconds)
        figures.produce_mb_s.append(args.messages * MESSAGE_BYTES / seconds / 1e6)
        seconds = _consume_throughput(bootstrap, topic, args.messages)
        figures.consume_msg_s.append(args.messages / seconds)
        figures.consume_mb_s.append(args.messages * MESSAGE_BYTES / seconds / 1e6)
        latencies = _produce_latency(bootstrap, topic, args.rate, args.latency_seconds)
        figures.p50_ms.append(_percentile(latencies, 50))
        figures.p99_ms.append(_percentile(latencies, 99))
    finally:
        for future in admin.delete_topics([topic]).values():
            future.result(30)


def _produce_throughput(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000, "acks": "all"}
    )
    payload = os.urandom(MESSAGE_BYTES)
    producer.produce(topic, value=payload)  # connect and fetch metadata outside the clock
    producer.flush(30)
    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=payload)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("messages left undelivered")
    return time.perf_counter() - start


def _consume_throughput(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    received = 0
    start = time.perf_counter()
    deadline = start + 300
    # count + 1: the warm-up message of the produce test is in the topic too.
    while received < count + 1:
        received += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
        if time.perf_counter() > deadline:
            raise RuntimeError(f"consumed only {received} of {count + 1}")
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds


def _produce_latency(bootstrap: str, topic: str, rate: int, duration_s: float) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    payload = os.urandom(MESSAGE_BYTES)
    producer.produce(topic, value=payload)
    producer.flush(30)
    latencies: list[float] = []

    def on_delivery(sent_at: float) -> Callable[[Any, Any], None]:
        def record(err: Any, _msg: Any) -> None:
            if err is None:
                latencies.append((time.perf_counter() - sent_at) * 1000)

        return record

    interval = 1 / rate
    start = time.perf_counter()
    for i in range(int(rate * duration_s)):
        send_at = start + i * interval
        while (now := time.perf_counter()) < send_at:
            producer.poll(min(send_at - now, 0.001))
        producer.produce(topic, value=payload, on_delivery=on_delivery(now))
        producer.poll(0)
    producer.flush(60)
    return latencies


def _percentile(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def _report(results: dict[str, Figures], args: argparse.Namespace) -> None:
    med = statistics.median
    direct = results["direct"]
    gateways = [name for name in results if name != "direct"]
    rows: list[tuple[str, Callable[[Figures], list[float]]]] = [
        ("produce MB/s", lambda f: f.produce_mb_s),
        ("produce msg/s", lambda f: f.produce_msg_s),
        ("consume MB/s", lambda f: f.consume_mb_s),
        ("consume msg/s", lambda f: f.consume_msg_s),
        (f"produce p50 ms @{args.rate}/s", lambda f: f.p50_ms),
        (f"produce p99 ms @{args.rate}/s", lambda f: f.p99_ms),
    ]
    mode = "quotas and usage events on" if args.quotas_usage else "no quotas, no usage events"
    print(
        f"confluent-kafka, {MESSAGE_BYTES} B messages, {args.messages} per round, "
        f"{args.rounds} rounds (medians), {PARTITIONS} partitions, acks=all; gateway: {mode}"
    )
    print("| metric | direct | " + " | ".join(f"{g} | {g} / direct" for g in gateways) + " |")
    print("|---|---|" + "---|---|" * len(gateways))
    for name, pick in rows:
        d = med(pick(direct))
        cells = " | ".join(f"{med(pick(results[g])):,.2f} | {med(pick(results[g])) / d:.1%}"
                           for g in gateways)  # fmt: skip
        print(f"| {name} | {d:,.2f} | {cells} |")
    for p in ("p50", "p99"):
        cells = " | ".join(
            f"{med(getattr(results[g], f'{p}_ms')) - med(getattr(direct, f'{p}_ms')):+.2f} ms | "
            for g in gateways
        )
        print(f"| {p} added latency | | {cells}|")


if __name__ == "__main__":
    main()
