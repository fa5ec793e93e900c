"""A greedy confluent-kafka producer and the produce rate a gateway's usage events show."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import pyarrow.dataset as ds
from confluent_kafka import Producer

from quotagate.protocol import api_keys

VALUE: Final = b"v" * 4000
OUTSTANDING: Final = 64  # records held ready beyond what the quota lets through


def produce_until(config: dict[str, Any], topic: str, stop_at: float, errors: list[str]) -> None:
    """Produce as fast as the gateway lets this client until ``stop_at`` (wall clock)."""
    producer = Producer(
        {
            **config,
            "linger.ms": 5,
            "batch.size": 16384,
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
