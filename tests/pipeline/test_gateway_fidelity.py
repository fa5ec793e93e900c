"""Replay is the gateway's twin: a real gateway run under quotas, replayed on Spark.

A real gateway in front of a real tansu broker enforces a quota file applied through
``quotagate quotas apply``; real clients push it into every kind of throttle (produce and
fetch byte rates, request time, KIP-599 mutations) while it writes usage events. Replaying
those events with the same quota file through the pipeline's Spark replay must predict the
throttle the gateway wrote into at least 99.9 % of the requests.
"""

from __future__ import annotations

import datetime
import socket
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from kio.static.primitive import i32, i32Timedelta, i64
from pyspark.sql import SparkSession

from quotagate.client import AdminConfig, NewTopic, SyncAdminClient
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.channel import build_request
from quotagate.pipeline.replay.job import replay
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.framing import FrameReader
from quotagate.protocol.kio_nested import build, nested
from support.recorded_run import consume, produce, record, start_recording_gateway

RUN_S = 12.0
QUOTA_FILE = """
[[quota]]
client-id = "fid-producer"
producer_byte_rate = 200000

[[quota]]
client-id = "fid-consumer"
consumer_byte_rate = 100000

[[quota]]
client-id = "fid-meta"
request_percentage = 2.0

[[quota]]
client-id = "fid-admin"
controller_mutation_rate = 2.0
"""


def _describe_cluster_storm(bootstrap: str, stop: threading.Event) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fid-meta")
    while not stop.is_set():
        try:
            admin.list_topics()
        except KafkaError:
            # kafka-python may find its node not ready while the gateway mutes it; it
            # reconnects on the next call, which is all the storm needs.
            continue
    admin.close()


def _create_topics(bootstrap: str, prefix: str) -> None:
    config = AdminConfig.of(bootstrap, client_id="fid-admin")
    with SyncAdminClient(config) as admin:
        # Three topics per strict CreateTopics: 36 partitions against a burst of 22, so some
        # requests are admitted topic by topic in part, the refused topics retried.
        for i in range(6):
            admin.create_topics([NewTopic(f"{prefix}-{i}-{j}", 2, 1) for j in range(3)])


def _follower_fetches(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """Fetches as a replica would send them (replica id >= 0), under the consumer's client
    id: exempt from both its quotas in the gateway, and so they must be in the replay."""
    host, _, port = bootstrap.rpartition(":")
    fetch = nested(api_table.request_schema(api_keys.FETCH, 12), "FetchTopic")
    partition = nested(api_table.request_schema(api_keys.FETCH, 12), "FetchPartition")
    request = build_request(
        api_keys.FETCH,
        12,
        replica_id=i32(111),
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(1_048_576),
        topics=(
            build(
                fetch,
                topic=topic,
                partitions=(
                    build(
                        partition,
                        partition=i32(0),
                        fetch_offset=i64(0),
                        partition_max_bytes=i32(1_048_576),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    reader = FrameReader()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        correlation = 0
        while not stop.is_set():
            correlation += 1
            sock.sendall(codec.encode_request_frame(request, correlation, "fid-consumer"))
            while reader.next_frame() is None:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                reader.feed(chunk)
            stop.wait(0.02)


@pytest.mark.timeout(600)
def test_replay_reproduces_the_throttles_of_a_recorded_gateway_run(
    spark: SparkSession,
    start_tansu: Callable[[], TansuBroker],
    start_gateway: Callable[..., BackgroundGateway],
    tmp_path: Path,
) -> None:
    recording = start_recording_gateway(start_tansu, start_gateway, tmp_path / "usage", QUOTA_FILE)
    bootstrap, topic = recording.bootstrap, recording.topic
    usage_dir = record(
        recording,
        RUN_S,
        [
            partial(produce, bootstrap, "fid-producer", topic, config={"batch.size": 16384}),
            partial(consume, bootstrap, "fid-consumer", topic),
            partial(_describe_cluster_storm, bootstrap),
            partial(_follower_fetches, bootstrap, topic),
        ],
        once=[partial(_create_topics, bootstrap, topic)],
    )

    summary: dict[str, Any] = replay(spark, usage_dir, QUOTA_FILE, tmp_path / "replay")
    requests = spark.read.parquet(str(tmp_path / "replay" / "requests"))
    causes = {
        row.throttle_cause
        for row in requests.where("throttle_ms > 0").select("throttle_cause").distinct().collect()
    }
    assert {"produce", "fetch", "request", "controller_mutation"} <= causes, causes
    assert summary["events"] > 500, summary
    followers = requests.where("api_key = 1 AND follower")
    assert followers.count() > 10 and followers.where("predicted_throttle_ms > 0").count() == 0
    mutations = requests.where("api_key = 19")
    partly_refused = mutations.where("error_code = 89 AND size(topics) > 1").count()
    assert partly_refused > 0, "no strict CreateTopics was refused topic by topic"
    assert mutations.where("predicted_error_code != error_code").count() == 0
    mismatches = requests.where("predicted_throttle_ms != throttle_ms").count()
    assert summary["agreement_with_recorded"] >= 0.999, (summary, mismatches)
