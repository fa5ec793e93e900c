"""Greedy confluent-kafka producers side by side, and the produce rate a gateway's usage
events show for each; ``assert_alice_held_while_bob_runs_free`` is the race most quota tests
run, whatever names the two clients (a password, a certificate, a token)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow.dataset as ds
from confluent_kafka import Producer

from quotagate.protocol import api_keys
from quotagate.store.quotas import Change
from support import bounds
from support.clients import new_topic

VALUE: Final = b"v" * 4000
BATCH_BYTES: Final = 16384
OUTSTANDING: Final = 64  # records held ready beyond what the quota lets through
WARM_UP_S: Final = 4.0
# 10 s: these producers' 16 KB requests are 1-6 % of what their quotas allow in a second, so
# a throttled producer's rate is even from one second to the next once the warm-up is over.
MEASURE_S: Final = 10.0


def produce_until(config: dict[str, Any], topic: str, stop_at: float, errors: list[str]) -> None:
    """Produce as fast as the gateway lets this client until ``stop_at`` (wall clock)."""
    producer = Producer(
        {
            **config,
            "linger.ms": 5,
            "batch.size": BATCH_BYTES,
            "max.in.flight": 5,
            "request.timeout.ms": 30000,
            "queue.buffering.max.messages": OUTSTANDING,
        }
    )

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    while time.time() < stop_at:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60) != 0:
        errors.append("undelivered records at the end")


def usage_rows(path: Path) -> list[dict[str, Any]]:
    return list(ds.dataset(path, format="parquet", partitioning="hive").to_table().to_pylist())


def produce_rate(rows: list[dict[str, Any]], principal: str, start: float, seconds: float) -> float:
    """Produce request bytes per second of ``principal`` in [start, start + seconds)."""
    wire = sum(
        row["request_bytes"]
        for row in rows
        if row["principal"] == principal
        and row["api_key"] == api_keys.PRODUCE
        and start <= row["ts_ms"] / 1000 < start + seconds
    )
    return wire / seconds


def race(configs: Mapping[str, dict[str, Any]], topic: str, measure_s: float = MEASURE_S) -> float:
    """One greedy producer per entry of ``configs``, all at once, for ``WARM_UP_S +
    measure_s`` and a second; each must deliver everything. Returns the wall-clock second
    from which ``measure_s`` is measured."""
    start = time.time()
    stop_at = start + WARM_UP_S + measure_s + 1
    errors: dict[str, list[str]] = {who: [] for who in configs}
    threads = [
        threading.Thread(target=produce_until, args=(config, topic, stop_at, errors[who]))
        for who, config in configs.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == {who: [] for who in configs}
    return start + WARM_UP_S


def measured_rate(rows: list[dict[str, Any]], principal: str, measured_from: float) -> float:
    return produce_rate(rows, principal, measured_from, MEASURE_S)


def assert_held(
    rate: float, quota: float, windows: Mapping[str, float], connections: int = 1
) -> None:
    """At most what Kafka's arithmetic lets ``connections`` greedy producers through over the
    measure (support/bounds.py; each connection's last batch is charged before its throttle is
    served). The floor only shows the client was not over-throttled: a greedy client sharing
    two cores with an unthrottled one, the gateway and the broker loses time it cannot make
    up."""
    ceiling = bounds.ceiling(
        MEASURE_S, windows, quota=quota, in_flight_bytes=connections * BATCH_BYTES
    )
    assert 0.85 * quota <= rate <= ceiling * quota, (rate / quota, ceiling)


def assert_alice_held_while_bob_runs_free(
    gateway: Any,
    configs: Mapping[str, dict[str, Any]],
    usage: Path,
    quota: float,
    windows: Mapping[str, float],
) -> list[dict[str, Any]]:
    """``configs`` of ``alice`` and ``bob`` :func:`race` on a topic of their own through
    ``gateway`` (a quota gateway of tests/enforcement/conftest.py writing usage events to
    ``usage``, its quota windows ``windows``) with a ``producer_byte_rate`` of ``quota`` on
    ``User:alice`` only: alice is held to it, bob runs past 1.5 x. The gateway is stopped (its
    usage flushed); returns its usage rows."""
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"user": "alice"}, "producer_byte_rate", float(quota))], "test", "test"
    )
    measured_from = race(configs, new_topic(configs["bob"], "race"))
    gateway.stop()
    rows = usage_rows(usage)
    assert_held(measured_rate(rows, "User:alice", measured_from), quota, windows)
    assert measured_rate(rows, "User:bob", measured_from) > 1.5 * quota
    return rows
