"""A recorded gateway run for the replay's fidelity tests: a real gateway in front of a real
tansu broker, quotas applied through ``quotagate quotas apply``, real clients driven for a
while, and the usage events the gateway wrote (tests/pipeline/test_*_fidelity.py)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.client import NewTopic, SyncAdminClient
from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings, UsageSettings
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway


@dataclass(frozen=True, slots=True)
class RecordingGateway:
    gateway: BackgroundGateway
    bootstrap: str
    topic: str
    """A one-partition topic the clients share."""
    usage_dir: Path


def start_recording_gateway(
    start_tansu: Callable[[], TansuBroker],
    start_gateway: Callable[..., BackgroundGateway],
    usage_dir: Path,
    quota_text: str,
    **settings: Any,
) -> RecordingGateway:
    """A gateway writing usage events to ``usage_dir`` (never rolled during a test), with
    ``quota_text`` applied as a user would apply it; ``settings``: more QuotaSettings."""
    broker = start_tansu()
    runtime = QuotaRuntime(
        QuotaSettings(
            super_users=frozenset({"User:ANONYMOUS"}),
            num_partitions=1,
            usage=UsageSettings(path=usage_dir, roll_interval_s=3600.0),
            **settings,
        )
    )
    gateway = start_gateway(broker.bootstrap, plugins=[QuotaEnforcement(runtime)])
    bootstrap = str(gateway.bootstrap)
    quota_path = usage_dir.parent / "quotas.toml"
    quota_path.write_text(quota_text, encoding="utf-8")
    applied = CliRunner().invoke(app, ["quotas", "apply", str(quota_path), "-b", bootstrap])
    assert applied.exit_code == 0, applied.output
    topic = f"recorded-{uuid.uuid4().hex[:8]}"
    with SyncAdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    return RecordingGateway(gateway, bootstrap, topic, usage_dir)


def record(
    recording: RecordingGateway,
    seconds: float,
    drivers: Sequence[Callable[[threading.Event], None]],
    once: Sequence[Callable[[], None]] = (),
) -> Path:
    """Run every driver until ``seconds`` have passed (and each of ``once`` to its end),
    then stop the gateway, which flushes its usage events; their directory."""
    stop = threading.Event()
    threads = [threading.Thread(target=drive, args=(stop,)) for drive in drivers]
    threads += [threading.Thread(target=task) for task in once]
    for thread in threads:
        thread.start()
    time.sleep(seconds)  # the length of the recorded run, not a synchronisation
    stop.set()
    for thread in threads:
        thread.join(120)
    recording.gateway.stop()
    return recording.usage_dir


def produce(
    bootstrap: str,
    client_id: str,
    topic: str,
    stop: threading.Event,
    *,
    payload: int = 1024,
    config: Mapping[str, Any] | None = None,
) -> None:
    """Produce as fast as the gateway lets this client, in small batches (``config``: more
    librdkafka settings), so that the run holds many produce requests. The client holds at
    most 256 kB ready: with librdkafka's default (100 000 records) the flush at the end
    waited out its timeout behind a backlog the quota lets through at its own pace."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 256,
            **(config or {}),
        }
    )
    value = b"x" * payload
    while not stop.is_set():
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.02)
        producer.poll(0)
    producer.flush(60)


def consume(bootstrap: str, client_id: str, topic: str, stop: threading.Event) -> None:
    """Fetch the topic from its start in small fetches, so that fetches are many."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"recorded-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 16384,
            "max.partition.fetch.bytes": 16384,
            "message.max.bytes": 16384,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    while not stop.is_set():
        consumer.poll(0.2)
    consumer.close()
