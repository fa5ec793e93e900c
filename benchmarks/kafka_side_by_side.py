"""Side by side with Kafka's own quota enforcement: the same workload in the same run.

    python benchmarks/kafka_side_by_side.py [--seconds 30] [--connections 1 5 20] [--windows 11]

A three-node Apache Kafka cluster (tests/support/kafka_cluster.py, quota windows set with
``--windows`` x 1 s on the brokers and on the gateway alike) and one ``quotagate serve`` in
front of it. Each workload runs twice, under a client id of its own each time:

* **Kafka**: straight at the brokers, the quota set in Kafka (AlterClientQuotas to Kafka);
* **quotagate**: through the gateway, the same quota set in quotagate (AlterClientQuotas to
  the gateway, which answers it itself) and none in Kafka.

Workloads (``--only`` names them), on a topic whose one partition broker 1 leads unless said
otherwise:

* ``produce``: greedy confluent-kafka producers (librdkafka's default batching, ``linger.ms``
  5), N connections of one client id, under ``producer_byte_rate``; ``produce-small`` the
  same with ``batch.size`` 16384, so one request is small against the quota;
* ``java-produce``: the Java producer of Kafka 4.3.1 with its default batching (``batch.size``
  16384, ``linger.ms`` 5), N instances of one ``client.id`` in one JVM
  (benchmarks/SideBySideClients.java, compiled with javac on first use);
* ``consume`` / ``java-consume``: consumers of one client id, N connections, each reading the
  topic from the start, under ``consumer_byte_rate``; ``consume-small`` /
  ``java-consume-small`` the same with ``max.partition.fetch.bytes`` 16384;
* KIP-599: the same CreateTopics burst under ``controller_mutation_rate`` (error codes and
  ``throttle_time_ms`` of each response);
* the known difference: one greedy producer on a topic with a partition led by each broker.

Rates are over the measure after a warm-up, as achieved ÷ quota, in wire bytes: what the
client sent or got (librdkafka's ``txbytes``/``rxbytes`` statistics, the Java client's
``outgoing-byte-total``/``incoming-byte-total``) and what was *delivered*: for producers
what the broker acknowledged (records acknowledged in the measure times the wire bytes per
record sent), for consumers the record bytes received (librdkafka's ``rxmsg_bytes``, the Java
client's ``bytes-consumed-total``). Bytes
sent also count what waits unread in socket buffers (the client's, the receiver's) and in a
relay's read-ahead, which can grow over a run while a quota holds the connection; bytes
received also count the empty answers of throttled fetches, whose number depends on how fast
each side answers, not on the quota. The delivered figure is the one to compare.
Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import math
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import jars
import java_drivers
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from passthrough import start_gateway
from quotagate.client.quotas import ClientQuotaAlteration
from quotagate.client.sync import SyncAdminClient
from quotagate.protocol import api_keys, codec
from quotagate.store.quotas import Change, QuotaStore
from support.exchanges import create_topics_request, request_body
from support.java import JVM_OPTIONS
from support.kafka_cluster import PLAIN_USERS, KafkaCluster, kafka_cluster

QUOTA = 1_000_000.0
"""Byte-rate quota of every byte-rate row, bytes per second."""
WARM_UP_S = 5.0
VALUE = b"q" * 1024
MUTATION_RATE = 2.0
MUTATION_WINDOWS = 10
REQUEST_PERCENTAGE = 1.0
"""request_percentage of the request-time row: 1 % of one thread, 10 ms a second."""
METADATA_VERSION = 12
USER_QUOTA = 1_000_000.0
"""producer_byte_rate of the SASL user row (User:alice at Kafka, User:bob at the gateway)."""
SMALL_BATCH = 16_384
"""librdkafka's ``batch.size`` in the small-request rows (the Java client's default), and
``max.partition.fetch.bytes`` of the small-response consumer rows."""
ROWS = (
    "produce",
    "produce-small",
    "java-produce",
    "consume",
    "consume-small",
    "java-consume",
    "java-consume-small",
    "user",
    "request",
    "spread",
    "mutations",
)
JAVA_DRIVER = Path(__file__).resolve().parent / "SideBySideClients.java"


# -- measuring --------------------------------------------------------------------------------


class WireBytes:
    """A client's cumulative wire bytes, from librdkafka's statistics every 500 ms; beside
    them its requests sent (``tx``) and the throttle times its brokers reported (the sum of
    each interval's ``throttle`` window), to tell how the two sides held it."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.samples: list[tuple[float, int]] = []
        self.requests: list[tuple[float, int]] = []
        self.throttles: list[tuple[float, int]] = []
        self.acked: list[tuple[float, int, int]] = []
        """(time, messages acknowledged, messages transmitted) of a producer."""
        self.records: list[tuple[float, int]] = []
        """(time, record bytes received) of a consumer: its fetched batches, without the
        bytes of the empty answers a throttled fetch gets."""
        self.produced = 0
        """Messages handed to the producer; the producing thread counts, and its ``poll``
        serves :meth:`on_stats`, so the two agree."""
        self._lock = threading.Lock()

    def on_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        brokers = stats["brokers"].values()
        total = sum(b[self.key] for b in brokers)
        sent = sum(b["tx"] for b in brokers)
        throttled = sum(b.get("throttle", {}).get("sum", 0) for b in brokers)
        # msg_cnt holds every message not yet acknowledged (queued or in flight).
        acked = self.produced - stats["msg_cnt"]
        now = time.time()
        with self._lock:
            self.samples.append((now, total))
            self.requests.append((now, sent))
            self.throttles.append((now, throttled))
            self.acked.append((now, acked, stats["txmsgs"]))
            self.records.append((now, stats["rxmsg_bytes"]))

    def acked_between(self, start: float, end: float) -> float:
        """Wire bytes the brokers acknowledged in ``[start, end]``: messages acknowledged
        times the wire bytes per message transmitted. Unlike :meth:`between` it leaves out
        what a relay reads ahead and holds: bytes a quota has not let through yet."""
        with self._lock:
            acked = [(t, a) for t, a, _ in self.acked]
            transmitted = [(t, m) for t, _, m in self.acked]
            sent = list(self.samples)
        messages = _grown(transmitted, start, end)
        per_message = _grown(sent, start, end) / messages if messages > 0 else 0.0
        return _grown(acked, start, end) * per_message

    def records_between(self, start: float, end: float) -> float:
        """Record bytes received in ``[start, end]``: what a consumer's quota let through.
        Unlike :meth:`between` it leaves out the throttled fetches' empty answers, whose
        number depends on how fast each side answers them, not on the quota."""
        return self._counted_between(self.records, start, end)

    def requests_between(self, start: float, end: float) -> int:
        with self._lock:
            inside = [n for t, n in self.requests if start <= t <= end]
        return inside[-1] - inside[0] if len(inside) >= 2 else 0

    def throttle_ms_between(self, start: float, end: float) -> int:
        with self._lock:
            return sum(n for t, n in self.throttles if start < t <= end)

    def between(self, start: float, end: float) -> float:
        """Bytes in ``[start, end]`` (:func:`_grown`)."""
        return self._counted_between(self.samples, start, end)

    def _counted_between(self, counter: list[tuple[float, int]], start: float, end: float) -> float:
        """What a cumulative ``counter`` grew by over ``[start, end]`` (:func:`_grown`)."""
        with self._lock:
            points = list(counter)
        return _grown(points, start, end)


def _grown(points: list[tuple[float, int]], start: float, end: float) -> float:
    """What a cumulative counter grew by over ``[start, end]``, read at both ends by straight
    lines between the samples around them (every 500 ms; a throttled client's rate can swing
    by half its quota from one second to the next), and scaled from the part of the measure
    the samples cover: a client whose statistics arrive late (they are served on its polling
    thread) has no sample past the measure's end, and must not count as having got nothing."""
    if len(points) < 2:
        return 0.0
    low, high = max(start, points[0][0]), min(end, points[-1][0])
    if high <= low:
        return 0.0
    return (_at(points, high) - _at(points, low)) * (end - start) / (high - low)


def _at(points: list[tuple[float, int]], when: float) -> float:
    """A cumulative counter at ``when``, between the samples on either side."""
    index = bisect.bisect_left(points, when, key=lambda point: point[0])
    (t0, n0), (t1, n1) = points[max(index - 1, 0)], points[index]
    return n0 + (n1 - n0) * (when - t0) / (t1 - t0) if t1 > t0 else float(n1)


LAST: dict[str, float] = {}
"""What the last measure saw besides its rate: requests sent, mean request (or response)
bytes, throttle ms reported per second of measure (summed over connections)."""


def _rate(meters: list[WireBytes], start: float, seconds: float) -> float:
    end = start + seconds
    moved = sum(m.between(start, end) for m in meters)
    requests = sum(m.requests_between(start, end) for m in meters)
    LAST.clear()
    LAST.update(
        requests=requests,
        mean_bytes=moved / requests if requests else 0.0,
        throttle_ms_per_s=sum(m.throttle_ms_between(start, end) for m in meters) / seconds,
        acked_per_s=sum(m.acked_between(start, end) for m in meters) / seconds,
        records_per_s=sum(m.records_between(start, end) for m in meters) / seconds,
    )
    return moved / seconds


def greedy_producers(
    bootstrap: str,
    topic: str,
    client_id: str,
    connections: int,
    seconds: float,
    extra: dict[str, Any] | None = None,
) -> float:
    """N producers of ``client_id`` as fast as they are let; bytes/s over the measure.
    ``extra``: more client configuration (security)."""
    meters = [WireBytes("txbytes") for _ in range(connections)]
    start = time.time()
    stop_at = start + WARM_UP_S + seconds + 1

    def run(meter: WireBytes) -> None:
        producer = Producer(
            {
                **(extra or {}),
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "statistics.interval.ms": 500,
                "stats_cb": meter.on_stats,
                # What is buffered waits for the quota anyway; a bound keeps memory flat.
                "queue.buffering.max.kbytes": 4096,
            }
        )
        while time.time() < stop_at:
            try:
                producer.produce(topic, VALUE)
                meter.produced += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.purge()
        producer.flush(5)

    _together([lambda m=m: run(m) for m in meters])
    return _rate(meters, start + WARM_UP_S, seconds)


def consumers(
    bootstrap: str,
    topic: str,
    client_id: str,
    connections: int,
    seconds: float,
    extra: dict[str, Any] | None = None,
) -> float:
    """N consumers of ``client_id``, each reading ``topic``'s partition 0 from the start.
    ``extra``: more client configuration."""
    meters = [WireBytes("rxbytes") for _ in range(connections)]
    start = time.time()
    stop_at = start + WARM_UP_S + seconds + 1

    def run(meter: WireBytes) -> None:
        consumer = Consumer(
            {
                **(extra or {}),
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "group.id": f"unused-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "statistics.interval.ms": 500,
                "stats_cb": meter.on_stats,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        while time.time() < stop_at:
            consumer.consume(1000, 0.2)
        consumer.close()

    _together([lambda m=m: run(m) for m in meters])
    return _rate(meters, start + WARM_UP_S, seconds)


def java_classes() -> Path:
    """benchmarks/SideBySideClients.java compiled against the ``kafka`` jar set, once."""
    digest = hashlib.sha256(jars.jars_dir("kafka").name.encode() + JAVA_DRIVER.read_bytes())
    directory = java_drivers.BUILD / f"side-by-side-{digest.hexdigest()[:12]}"
    return java_drivers.compile_java([JAVA_DRIVER], jars.classpath("kafka"), directory)


def java_clients(
    mode: str,
    bootstrap: str,
    topic: str,
    client_id: str,
    connections: int,
    seconds: float,
    fetch_bytes: int = 0,
) -> float:
    """N Java producers (``mode`` produce) or consumers (consume) of ``client_id`` in one JVM,
    each its own connection; bytes/s over the measure from the clients' own byte counters.
    ``fetch_bytes``: the consumers' ``max.partition.fetch.bytes``, if not their default."""
    classpath = os.pathsep.join((str(java_classes()), jars.classpath("kafka")))
    done = subprocess.run(
        [
            "java",
            *JVM_OPTIONS,
            "-cp",
            classpath,
            "SideBySideClients",
            mode,
            bootstrap,
            topic,
            client_id,
            str(connections),
            str(WARM_UP_S),
            str(seconds),
            *([str(fetch_bytes)] if fetch_bytes else []),
        ],
        capture_output=True,
        text=True,
        timeout=WARM_UP_S + seconds + 120,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"SideBySideClients exited {done.returncode}: {done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    LAST.clear()
    LAST.update(
        requests=result["requests"],
        mean_bytes=result["bytes"] / result["requests"] if result["requests"] else 0.0,
        throttle_ms_per_s=result["throttleMs"] / result["seconds"],
        acked_per_s=result.get("ackedBytes", 0.0) / result["seconds"],
        records_per_s=result.get("recordBytes", 0.0) / result["seconds"],
        linger_ms=result["lingerMs"],
        batch_size=result["batchSize"],
    )
    return float(result["bytes"]) / float(result["seconds"])


def _together(runs: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=run) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# -- KIP-599 ----------------------------------------------------------------------------------


def _exchange(sock: socket.socket, body: Any, correlation: int, client_id: str) -> Any:
    sock.sendall(codec.encode_request_frame(body, correlation, client_id))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    frame = struct.pack(">i", size) + sock.recv(size, socket.MSG_WAITALL)
    return codec.decode_response(frame, api_keys.CREATE_TOPICS, 7)


def mutation_burst(address: str, client_id: str) -> list[tuple[list[int], int]]:
    """CreateTopics v7 bursts (20, 1, 1 partitions; then 1; then 3 after 1 s): per response,
    the topics' error codes and ``throttle_time_ms``."""
    host, _, port = address.rpartition(":")
    answers: list[tuple[list[int], int]] = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for correlation, (counts, pause) in enumerate((((20, 1, 1), 0), ((1,), 0), ((3,), 1.0))):
            time.sleep(pause)
            names = [(f"burst-{uuid.uuid4().hex[:8]}", n) for n in counts]
            response = _exchange(sock, create_topics_request(7, names), correlation, client_id)
            codes = [int(t.error_code) for t in response.topics]
            answers.append((codes, int(response.throttle_time.total_seconds() * 1000)))
    return answers


# -- request time (KIP-124) ------------------------------------------------------------------


def cheap_requests(address: str, client_id: str, seconds: float) -> float:
    """One connection sending Metadata (no topics) back to back, answer by answer, as a
    client that ignores ``throttle_time_ms`` (the broker's or the gateway's mute holds it):
    requests per second over the measure. ``LAST`` gets the throttle ms reported per second."""
    host, _, port = address.rpartition(":")
    request = request_body(
        api_keys.METADATA,
        METADATA_VERSION,
        topics=(),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    start = time.time()
    measure_from, measure_to = start + WARM_UP_S, start + WARM_UP_S + seconds
    count = 0
    throttle_ms = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        correlation = 0
        while (now := time.time()) < measure_to:
            correlation += 1
            sock.sendall(codec.encode_request_frame(request, correlation, client_id))
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            frame = struct.pack(">i", size) + sock.recv(size, socket.MSG_WAITALL)
            if now >= measure_from:
                count += 1
                response = codec.decode_response(frame, api_keys.METADATA, METADATA_VERSION)
                throttle_ms += int(response.throttle_time.total_seconds() * 1000)
    LAST.clear()
    LAST.update(requests=count, throttle_ms_per_s=throttle_ms / seconds)
    return count / seconds


# -- the run ----------------------------------------------------------------------------------


class SideBySide:
    def __init__(self, cluster: KafkaCluster, gateway: str, repeat: int) -> None:
        self.cluster = cluster
        self.kafka = cluster.bootstrap()
        self.gateway = gateway
        self.repeat = repeat
        self.sasl_gateway: str | None = None

    def quota(self, bootstrap: str, entity: dict[str, str], key: str, value: float) -> None:
        with SyncAdminClient(bootstrap) as admin:
            admin.alter_client_quotas(
                [ClientQuotaAlteration.of(entity, {key: value})]
            ).raise_on_error()
        time.sleep(1.0)  # Kafka applies a quota once its metadata log reaches each broker

    def topic(self, leaders: list[int]) -> str:
        name = f"side-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.kafka})
        new = NewTopic(name, len(leaders), replica_assignment=[[leader] for leader in leaders])
        for future in admin.create_topics([new]).values():
            future.result(30)
        return name

    def both(
        self,
        key: str,
        quota: float,
        measure: Callable[[str, str], float],
        *,
        one_broker: bool = False,
    ) -> Pair:
        """``measure(bootstrap, client_id)`` straight at Kafka and through quotagate, ``repeat``
        times, alternating which goes first; achieved ÷ quota of each run."""
        pair = Pair()
        sides = [("kafka", self.kafka), ("quotagate", self.gateway)]
        if one_broker:
            sides = [("kafka", self.cluster.nodes[1].address()), ("quotagate", self.gateway)]
        for round_ in range(self.repeat):
            for side, bootstrap in sides if round_ % 2 == 0 else sides[::-1]:
                client_id = f"{side}-{uuid.uuid4().hex[:6]}"
                self.quota(bootstrap, {"client-id": client_id}, key, quota)
                pair.add(side, measure(bootstrap, client_id) / quota, _seen(quota))
        return pair


def _seen(quota: float) -> dict[str, float]:
    """What the last measure saw, its acknowledged bytes (if any) as a ratio to ``quota``."""
    seen = dict(LAST)
    acked = seen.pop("acked_per_s", 0.0)
    records = seen.pop("records_per_s", 0.0)
    if acked:
        seen["acked"] = acked / quota
    elif records:
        seen["records"] = records / quota
    return seen


class Pair:
    """Each side's runs of one row: achieved ÷ quota and what else the run saw."""

    def __init__(self) -> None:
        self.runs: dict[str, list[tuple[float, dict[str, float]]]] = {"kafka": [], "quotagate": []}

    def add(self, side: str, ratio: float, seen: dict[str, float]) -> None:
        self.runs[side].append((ratio, seen))
        detail = ", ".join(
            f"{k} {v:.3f}" if k in ("acked", "records") else f"{k} {v:.0f}" for k, v in seen.items()
        )
        print(f"  {side}: {ratio:.3f} ({detail})", file=sys.stderr)

    def cell(self, side: str, key: str = "") -> str:
        """Achieved ÷ quota by wire bytes (or by ``key`` of what the runs saw)."""
        ratios = [s.get(key, 0.0) if key else r for r, s in self.runs[side]]
        if len(ratios) == 1:
            return f"{ratios[0]:.3f}"
        mean = statistics.fmean(ratios)
        return f"{mean:.3f} ({min(ratios):.3f}–{max(ratios):.3f})"

    def seen(self, side: str, key: str) -> float:
        values = [s[key] for _, s in self.runs[side] if key in s]
        return statistics.fmean(values) if values else 0.0

    def difference(self, key: str = "") -> str:
        kafka = [s.get(key, 0.0) if key else r for r, s in self.runs["kafka"]]
        gateway = [s.get(key, 0.0) if key else r for r, s in self.runs["quotagate"]]
        return f"{statistics.fmean(gateway) - statistics.fmean(kafka):+.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--windows", type=int, default=11, help="quota.window.num, both sides")
    parser.add_argument("--skip-consumers", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side and row, alternating")
    parser.add_argument("--only", nargs="+", choices=ROWS, default=list(ROWS), help="rows to run")
    parser.add_argument(
        "--queued-max-requests", type=int, default=0, help="the gateway's, if set (default 500)"
    )
    args = parser.parse_args()
    # A greedy client can settle into taking a window's worth every other window (1.4, then
    # 0.4 x the quota, second by second), on Kafka and through the gateway alike: a measure
    # of whole spans of the windows reads that as its mean, where 15 s of 2 x 1 s windows
    # read it 0.035 high or low depending on which second the measure started on.
    spans = math.ceil(args.seconds / args.windows)
    if spans * args.windows != args.seconds:
        print(f"measure: {spans * args.windows} s, whole spans of the windows", file=sys.stderr)
        args.seconds = float(spans * args.windows)
    if args.skip_consumers and "consume" in args.only:
        args.only.remove("consume")
    windows = {
        "quota.window.num": str(args.windows),
        "quota.window.size.seconds": "1",
        "controller.quota.window.num": str(MUTATION_WINDOWS),
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        kafka_cluster(Path(tmp) / "kafka", windows, request_log=False) as c,
    ):
        quotas = f"""
[quotas]
"quota.window.num" = {args.windows}
"quota.window.size.seconds" = 1
"controller.quota.window.num" = {MUTATION_WINDOWS}
"""
        if args.queued_max_requests:
            gateway_keys = f'[gateway]\n"queued.max.requests" = {args.queued_max_requests}\n'
        else:
            gateway_keys = ""
        extra = quotas + '"super.users" = ["User:ANONYMOUS"]\n' + gateway_keys
        gateway, process = start_gateway(c.bootstrap(), Path(tmp), extra, node_ids=tuple(c.nodes))
        processes = [process]
        try:
            run = SideBySide(c, gateway, args.repeat)
            if "user" in args.only:
                run.sasl_gateway, sasl_process = _sasl_gateway(c, Path(tmp), quotas + gateway_keys)
                processes.append(sasl_process)
            _report(run, args)
        finally:
            for each in processes:
                each.terminate()
                each.wait(30)


def _sasl_gateway(cluster: KafkaCluster, workdir: Path, quotas: str) -> tuple[str, Any]:
    """A gateway with a SASL passthrough listener in front of Kafka's SASL_SSL listener (its
    own link as ``admin``), ``producer_byte_rate`` on User:bob in its store before it starts."""
    store_path = workdir / "sasl-front.db"
    store = QuotaStore.open(store_path)
    store.alter_client_quotas(
        [Change({"user": "bob"}, "producer_byte_rate", USER_QUOTA)], "benchmark", "benchmarks"
    )
    store.close()
    upstream = f"""security.protocol = "SASL_SSL"
ssl.ca.location = "{cluster.certificates.certificate}"
sasl.mechanism = "PLAIN"
sasl.username = "admin"
sasl.password = "{PLAIN_USERS["admin"]}"
"""
    listener_keys = 'security.protocol = "SASL_PLAINTEXT"\nsasl.mode = "passthrough"'
    extra = quotas + f'[store]\npath = "{store_path}"\n'
    return start_gateway(
        cluster.bootstrap("SASL_SSL"),
        workdir,
        extra,
        node_ids=tuple(cluster.nodes),
        upstream_extra=upstream,
        listener_extra=listener_keys,
        client_config=_sasl_client("SASL_PLAINTEXT", "bob"),
    )


def _sasl_client(protocol: str, user: str) -> dict[str, Any]:
    return {
        "security.protocol": protocol,
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PLAIN_USERS[user],
    }


def _report(run: SideBySide, args: argparse.Namespace) -> None:
    rows: list[str] = []

    def row(label: str, n: int | str, pair: Pair) -> None:
        extra = (
            f"{pair.seen('kafka', 'mean_bytes') / 1000:.0f} / "
            f"{pair.seen('quotagate', 'mean_bytes') / 1000:.0f}"
        )
        throttled = (
            f"{pair.seen('kafka', 'throttle_ms_per_s'):.0f} / "
            f"{pair.seen('quotagate', 'throttle_ms_per_s'):.0f}"
        )
        delivered = next((k for k in ("acked", "records") if pair.seen("kafka", k)), "")
        if delivered:
            acked = (
                f"{pair.cell('kafka', delivered)} | {pair.cell('quotagate', delivered)} "
                f"| {pair.difference(delivered)}"
            )
        else:
            acked = "— | — | —"
        rows.append(
            f"| {label} | {n} | {pair.cell('kafka')} | {pair.cell('quotagate')} "
            f"| {pair.difference()} | {acked} | {extra} | {throttled} |"
        )
        print(rows[-1], file=sys.stderr)

    if {"produce", "produce-small", "java-produce", "user"} & set(args.only):
        single = run.topic([1])

    def rate_rows(name: str, quota_key: str, workload: Callable[..., Any], label: Any) -> None:
        """``name``'s row for each connection count: ``workload(bootstrap, client_id, n)``
        on both sides; ``label``, or ``label(pair)`` when it needs the results."""
        if name not in args.only:
            return
        for n in args.connections:
            pair = run.both(quota_key, QUOTA, lambda b, c, n=n: workload(b, c, n))
            row(label(pair) if callable(label) else label, n, pair)

    small = {"batch.size": SMALL_BATCH}
    rate_rows(
        "produce",
        "producer_byte_rate",
        lambda b, c, n: greedy_producers(b, single, c, n, args.seconds),
        "produce, librdkafka",
    )
    rate_rows(
        "produce-small",
        "producer_byte_rate",
        lambda b, c, n: greedy_producers(b, single, c, n, args.seconds, small),
        f"produce, librdkafka, batch.size {SMALL_BATCH}",
    )
    rate_rows(
        "java-produce",
        "producer_byte_rate",
        lambda b, c, n: java_clients("produce", b, single, c, n, args.seconds),
        lambda pair: _java_label("produce", pair),
    )
    filled = int(QUOTA * (WARM_UP_S + args.seconds + 2) * 1.5)
    if {"consume", "java-consume"} & set(args.only):
        loaded = run.topic([1])
        preload(run.kafka, loaded, filled)
    if {"consume-small", "java-consume-small"} & set(args.only):
        loaded_small = run.topic([1])
        preload(run.kafka, loaded_small, filled, SMALL_BATCH)
    small_fetch = {"max.partition.fetch.bytes": SMALL_BATCH}
    rate_rows(
        "consume",
        "consumer_byte_rate",
        lambda b, c, n: consumers(b, loaded, c, n, args.seconds),
        "consume, librdkafka",
    )
    rate_rows(
        "java-consume",
        "consumer_byte_rate",
        lambda b, c, n: java_clients("consume", b, loaded, c, n, args.seconds),
        "consume, Java 4.3.1",
    )
    rate_rows(
        "consume-small",
        "consumer_byte_rate",
        lambda b, c, n: consumers(b, loaded_small, c, n, args.seconds, small_fetch),
        f"consume, librdkafka, max.partition.fetch.bytes {SMALL_BATCH}",
    )
    rate_rows(
        "java-consume-small",
        "consumer_byte_rate",
        lambda b, c, n: java_clients("consume", b, loaded_small, c, n, args.seconds, SMALL_BATCH),
        f"consume, Java 4.3.1, max.partition.fetch.bytes {SMALL_BATCH}",
    )
    if "user" in args.only:
        row("produce, SASL user quota", 1, _user_rows(run, single, args.seconds))
    if "spread" in args.only:
        spread = run.topic([1, 2, 3])
        pair = run.both(
            "producer_byte_rate",
            QUOTA,
            lambda b, c: greedy_producers(b, spread, c, 1, args.seconds),
        )
        row("produce, 3 partitions led by 3 brokers", 1, pair)
    print(
        f"\nquota {QUOTA:.0f} B/s, {args.windows} x 1 s windows, {args.seconds:.0f} s measure, "
        f"{run.repeat} run(s) per side alternating (mean, then min–max)"
    )
    print(
        "\n| workload | connections | Kafka achieved ÷ quota | quotagate achieved ÷ quota "
        "| quotagate − Kafka | Kafka delivered ÷ quota | quotagate delivered ÷ quota "
        "| quotagate − Kafka, delivered | mean request kB, Kafka / quotagate "
        "| throttle ms reported per s, Kafka / quotagate |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if "request" in args.only:
        _report_request_time(run, args.seconds)
    if "mutations" in args.only:
        _report_mutations(run)


def _java_label(what: str, pair: Pair) -> str:
    batching = (
        f"batch.size {pair.seen('kafka', 'batch_size'):.0f}, "
        f"linger.ms {pair.seen('kafka', 'linger_ms'):.0f}"
    )
    return f"{what}, Java 4.3.1 ({batching})"


def _user_rows(run: SideBySide, topic: str, seconds: float) -> Pair:
    """One greedy producer as a SASL user with a user quota: User:alice straight at Kafka's
    SASL_SSL listener (the quota in Kafka), User:bob through the SASL passthrough gateway (the
    quota in the gateway's store, none in Kafka)."""
    assert run.sasl_gateway is not None
    run.quota(run.kafka, {"user": "alice"}, "producer_byte_rate", USER_QUOTA)
    kafka_client = {
        **run.cluster.sasl_config("PLAIN", "alice"),
        "client.id": "alice-app",
    }
    gateway_client = {**_sasl_client("SASL_PLAINTEXT", "bob"), "client.id": "bob-app"}
    sides = [
        ("kafka", run.cluster.bootstrap("SASL_SSL"), kafka_client),
        ("quotagate", run.sasl_gateway, gateway_client),
    ]
    pair = Pair()
    for round_ in range(run.repeat):
        for side, bootstrap, client in sides if round_ % 2 == 0 else sides[::-1]:
            time.sleep(3.0)  # the user's earlier samples leave the (2 x 1 s) window
            rate = greedy_producers(
                bootstrap, topic, str(client["client.id"]), 1, seconds, extra=client
            )
            pair.add(side, rate / USER_QUOTA, _seen(USER_QUOTA))
    return pair


def _report_request_time(run: SideBySide, seconds: float) -> None:
    pair = run.both(
        "request_percentage",
        REQUEST_PERCENTAGE,
        lambda b, c: cheap_requests(b, c, seconds) * REQUEST_PERCENTAGE,
        one_broker=True,
    )
    print(f"\nKIP-124: request_percentage {REQUEST_PERCENTAGE} (10 ms of one thread a second)")
    print("\n| workload | side | requests/s | charged ms per request | throttle ms per s |")
    print("|---|---|---|---|---|")
    for side in ("kafka", "quotagate"):
        rate = statistics.fmean(r for r, _ in pair.runs[side]) / REQUEST_PERCENTAGE
        ratios = [r / REQUEST_PERCENTAGE for r, _ in pair.runs[side]]
        spread = f" ({min(ratios):.0f}–{max(ratios):.0f})" if len(ratios) > 1 else ""
        print(
            f"| Metadata v{METADATA_VERSION} (no topics), one connection, back to back | {side} "
            f"| {rate:.0f}{spread} | {10 * REQUEST_PERCENTAGE / rate:.2f} "
            f"| {pair.seen(side, 'throttle_ms_per_s'):.0f} |"
        )


def _report_mutations(run: SideBySide) -> None:
    print(
        f"\nKIP-599: controller_mutation_rate {MUTATION_RATE}/s, {MUTATION_WINDOWS} x 1 s windows"
    )
    print("\n| request | Kafka codes, throttle ms | quotagate codes, throttle ms |")
    print("|---|---|---|")
    answers = []
    for side, address in (("kafka", run.cluster.nodes[1].address()), ("quotagate", run.gateway)):
        client_id = f"{side}-mutations-{uuid.uuid4().hex[:6]}"
        run.quota(address, {"client-id": client_id}, "controller_mutation_rate", MUTATION_RATE)
        answers.append(mutation_burst(address, client_id))
    labels = ("CreateTopics (20, 1, 1)", "CreateTopics (1), at once", "CreateTopics (3), 1 s on")
    for label, kafka, gateway in zip(labels, *answers, strict=True):
        print(f"| {label} | {kafka[0]}, {kafka[1]} | {gateway[0]}, {gateway[1]} |")


def preload(bootstrap: str, topic: str, size: int, batch_size: int = 0) -> None:
    """``size`` bytes of records into ``topic``; in record batches of at most ``batch_size``
    bytes if given (a fetch returns at least one whole batch, whatever its limits)."""
    batching = {"batch.size": batch_size} if batch_size else {}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **batching})
    for _ in range(size // len(VALUE) + 1):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


if __name__ == "__main__":
    main()
