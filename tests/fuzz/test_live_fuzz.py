"""A real producer (acks=all, idempotent) and a real consumer keep working through
``quotagate serve`` while fuzz cases hit it on other connections.

Every acknowledged message must be read back exactly once (counted by payload), the gateway
must stay up with no traceback in its log, every connection it closed must have its log
line, and its resident set must stay under :data:`RSS_BOUND_KIB`. ``make test`` runs a few
hundred cases; ``make fuzz`` runs 100 000 and, with ``QUOTAGATE_FUZZ_REPORT`` set, writes
the figures (cases, duration, messages, RSS) as JSON for BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from fuzz.budget import Budget, expired
from fuzz.cases import (
    CaseMaker,
    Ending,
    Result,
    UpstreamGuard,
    describe,
    request_frames,
    run_case,
)
from fuzz.served import ServedGateway
from quotagate.gateway.embedded import TansuBroker

pytestmark = pytest.mark.integration

# The gateway idles at about 100 MiB; this leaves room for a few thousand connections'
# buffers and still catches a leak per connection or per hostile frame.
RSS_BOUND_KIB: Final = 256 * 1024
FUZZ_THREADS: Final = 2
FIXED_SEED: Final = 1414


@dataclass
class LiveClients:
    """A producer and a consumer of one topic, each in its own thread."""

    bootstrap: str
    topic: str
    acked: list[bytes] = field(default_factory=list)
    consumed: list[bytes] = field(default_factory=list)
    produce_errors: list[str] = field(default_factory=list)
    consume_errors: list[str] = field(default_factory=list)
    stop_producing: threading.Event = field(default_factory=threading.Event)
    stop_consuming: threading.Event = field(default_factory=threading.Event)
    client_errors: list[str] = field(default_factory=list)
    """librdkafka's error_cb (transient ones included): reported on failure, not asserted."""
    consumer_stats: dict[str, Any] = field(default_factory=dict)
    """The consumer's latest librdkafka statistics (stats_cb), for a failure to explain."""

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for thread in threads:
            thread.start()
        return threads

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.produce_errors.append(str(err))
        else:
            self.acked.append(msg.value())

    def _produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "error_cb": self._on_error("producer"),
            }
        )
        sequence = 0
        while not self.stop_producing.is_set():
            producer.produce(self.topic, value=b"m-%d" % sequence, on_delivery=self._on_delivery)
            sequence += 1
            producer.poll(0.002)  # paces the producer at a few hundred messages a second
        remaining = producer.flush(120)
        if remaining:
            self.produce_errors.append(f"{remaining} messages unflushed")

    def _on_error(self, client: str) -> Any:
        def record(error: Any) -> None:
            self.client_errors.append(f"{time.strftime('%H:%M:%S')} {client}: {error}")

        return record

    def _on_stats(self, text: str) -> None:
        self.consumer_stats = json.loads(text)

    def diagnosis(self) -> dict[str, Any]:
        """What the clients saw, for an assertion message: counts, the first payloads acked
        but not consumed, and where the consumer's fetcher stood."""
        consumed = set(self.consumed)
        missing = [payload for payload in list(self.acked) if payload not in consumed]
        partition = self.consumer_stats.get("topics", {}).get(self.topic, {})
        state = partition.get("partitions", {}).get("0", {})
        brokers = self.consumer_stats.get("brokers", {})
        return {
            "acked": len(self.acked),
            "consumed": len(self.consumed),
            "missing": len(missing),
            "first_missing": [p.decode() for p in missing[:5]],
            "last_consumed": [p.decode() for p in self.consumed[-3:]],
            "produce_errors": self.produce_errors[:10],
            "consume_errors": self.consume_errors[:10],
            "client_errors": self.client_errors[-10:],
            "consumer_partition": {
                key: state.get(key)
                for key in (
                    "fetch_state",
                    "next_offset",
                    "app_offset",
                    "hi_offset",
                    "ls_offset",
                    "lo_offset",
                    "consumer_lag",
                    "fetchq_cnt",
                    "msgs",
                    "rxmsgs",
                    "rxbytes",
                    "leader",
                )
            },
            "consumer_brokers": {
                name: {
                    key: broker.get(key)
                    for key in ("state", "stateage", "outbuf_cnt", "waitresp_cnt", "connects")
                }
                for name, broker in brokers.items()
            },
        }

    def _consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"fuzz-{self.topic}",
                "enable.auto.commit": False,
                "error_cb": self._on_error("consumer"),
                "statistics.interval.ms": 1000,
                "stats_cb": self._on_stats,
            }
        )
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        try:
            while not self.stop_consuming.is_set():
                message = consumer.poll(0.2)
                if message is None:
                    continue
                error = message.error()
                if error is None:
                    self.consumed.append(message.value())
                elif error.code() != KafkaError._PARTITION_EOF:
                    self.consume_errors.append(str(error))
        finally:
            consumer.close()


@dataclass
class RssSampler:
    """Samples the gateway's VmRSS in a thread; keeps the peak."""

    gateway: ServedGateway
    interval_s: float = 0.25
    peak_kib: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.baseline_kib = self.gateway.rss_kib()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and self.gateway.alive():
            self.peak_kib = max(self.peak_kib, self.gateway.rss_kib())
            self.samples += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        if self.gateway.alive():
            self.peak_kib = max(self.peak_kib, self.gateway.rss_kib())


@pytest.fixture
def live_topic(served_gateway: ServedGateway) -> Iterator[str]:
    topic = f"live-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": served_gateway.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    yield topic


def _fuzz(gateway: ServedGateway, budget: Budget, seed: int, guard: UpstreamGuard) -> list[Result]:
    """Run ``budget.cases`` cases over FUZZ_THREADS threads; every result."""
    frames = request_frames(200, seed if budget.fuzzing else None)
    deadline = budget.deadline("live")
    results: list[list[Result]] = [[] for _ in range(FUZZ_THREADS)]
    share = -(-budget.cases // FUZZ_THREADS)

    def worker(index: int) -> None:
        maker = CaseMaker(frames, random.Random(seed + index), guard)
        for _ in range(share):
            if expired(deadline):
                return
            results[index].append(run_case(gateway.address, maker.next()))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(FUZZ_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [result for part in results for result in part]


def _unlogged_closes(gateway: ServedGateway, results: list[Result]) -> Counter[int]:
    """Client ports the gateway closed more often than it logged a close for (ports recur
    over many cases, so the comparison is of counts)."""
    logged = Counter(
        int(port)
        for port in re.findall(
            r"event=(?:protocol_error|connection_closed) .*?client=127\.0\.0\.1:(\d+) ",
            gateway.log(),
        )
    )
    closed = Counter(r.client_port for r in results if r.ending is Ending.CLOSED)
    return closed - logged


def test_live_clients_see_nothing_of_the_fuzzing(
    served_gateway: ServedGateway,
    fuzz_tansu: TansuBroker,
    upstream_guard: UpstreamGuard,
    live_topic: str,
    budget: Budget,
    wait_for: Any,
) -> None:
    seed = random.randrange(1 << 32) if budget.fuzzing else FIXED_SEED
    print(f"live fuzz seed {seed}")
    clients = LiveClients(served_gateway.bootstrap, live_topic)
    threads = clients.start()
    try:
        wait_for(lambda: len(clients.acked) > 0, 60, "the producer's first acknowledgement")
        started = time.monotonic()
        with RssSampler(served_gateway) as rss:
            results = _fuzz(served_gateway, budget, seed, upstream_guard)
            fuzz_seconds = time.monotonic() - started
            clients.stop_producing.set()
            threads[0].join(180)
            wait_for(
                lambda: len(clients.consumed) >= len(clients.acked),
                120,
                "the consumer to read every acknowledged message",
                explain=lambda: _consumer_stall(clients, served_gateway, fuzz_tansu),
            )
    finally:
        clients.stop_producing.set()
        clients.stop_consuming.set()
        for thread in threads:
            thread.join(60)

    consumed = Counter(clients.consumed)
    acked = Counter(clients.acked)
    lost = [payload for payload in acked if consumed[payload] == 0]
    duplicated = [payload for payload, n in consumed.items() if n > 1]
    figures = {
        "seed": seed,
        "cases": len(results),
        "endings": dict(Counter(r.ending.value for r in results)),
        "kinds": dict(Counter(r.case.kind for r in results)),
        "fuzz_seconds": round(fuzz_seconds, 1),
        "acked": len(clients.acked),
        "consumed": len(clients.consumed),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "produce_errors": clients.produce_errors[:10],
        "consume_errors": clients.consume_errors[:10],
        "rss_baseline_kib": rss.baseline_kib,
        "rss_peak_kib": rss.peak_kib,
        "rss_samples": rss.samples,
        "rss_bound_kib": RSS_BOUND_KIB,
        "withheld_from_upstream": upstream_guard.withheld,
        "withheld_for_topic_names": upstream_guard.withheld_names,
    }
    print(f"live fuzz: {figures}")
    _report(figures)

    assert served_gateway.alive(), served_gateway.log()[-3000:]
    assert fuzz_tansu.running, figures
    assert served_gateway.tracebacks() == []
    assert len(results) == budget.cases or budget.seconds is not None
    unlogged = _unlogged_closes(served_gateway, results)
    assert unlogged == Counter(), [describe(r) for r in results if r.client_port in unlogged][:5]
    diagnosis = {
        **figures,
        "first_lost": [p.decode() for p in lost[:5]],
        "first_duplicated": [p.decode() for p in duplicated[:5]],
        "clients": clients.diagnosis(),
    }
    assert acked and not lost and not duplicated, diagnosis
    assert max(acked.values()) == 1, diagnosis  # the producer never saw a payload acked twice
    assert clients.produce_errors == [] and clients.consume_errors == [], diagnosis
    assert rss.peak_kib < RSS_BOUND_KIB, figures


def _consumer_stall(clients: LiveClients, gateway: ServedGateway, tansu: TansuBroker) -> str:
    """Why the consumer has not read every acknowledged message: what the clients saw, what
    the upstream itself holds, and the gateway's log."""
    upstream = _upstream_view(tansu.bootstrap, clients.topic, clients.acked)
    return (
        f"{clients.diagnosis()}\nupstream: {upstream}\n"
        f"gateway log, fuzz lines left out:\n{_quiet_log(gateway)}"
    )


def _upstream_view(bootstrap: str, topic: str, acked: list[bytes]) -> dict[str, Any]:
    """The topic as the broker itself holds it, read around the gateway: whether what the
    consumer misses was stored (and where), or never reached the log."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    offsets: dict[bytes, list[int]] = {}
    read, end = 0, -1
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    end = message.offset()
                    break
                continue
            read += 1
            offsets.setdefault(message.value(), []).append(message.offset())
    except Exception as exc:  # a diagnosis must not hide the failure it explains
        return {"error": repr(exc)}
    finally:
        consumer.close()
    missing = [payload for payload in acked if payload not in offsets]
    return {
        "watermarks": (low, high),
        "read": read,
        "end": end,
        "acked_not_stored": len(missing),
        "first_acked_not_stored": [p.decode() for p in missing[:5]],
        "stored_twice": sum(1 for found in offsets.values() if len(found) > 1),
    }


_FUZZ_EVENTS: Final = re.compile(r"event=(?:protocol_error|unsupported_version|connection_closed) ")


def _quiet_log(gateway: ServedGateway, lines: int = 30) -> str:
    """The gateway log's last lines other than the fuzz cases' own closes and refusals."""
    kept = [line for line in gateway.log().splitlines() if not _FUZZ_EVENTS.search(line)]
    return "\n".join(kept[-lines:])


def _report(figures: dict[str, Any]) -> None:
    path = os.environ.get("QUOTAGATE_FUZZ_REPORT")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
