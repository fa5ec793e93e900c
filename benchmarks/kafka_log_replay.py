"""Kafka's own throttles, replayed: given the requests as a Kafka broker logged them, does the
engine throttle each one as the broker did?

    python benchmarks/kafka_log_replay.py [--connections 5 20] [--seconds 15] [--windows 2]

The side-by-side rows with librdkafka's default batching (0.7-0.9 MB requests against a 1 MB/s
quota, benchmarks/kafka_side_by_side.py) vary from run to run on Kafka itself by more than the
±0.03 they are compared at, so those rows cannot say whether the gateway decides as Kafka does.
This asks it without the noise: greedy confluent-kafka producers of one client id (its default
batching, ``linger.ms`` 5) straight at a three-node Kafka 4.3.1 cluster (tests/support/
kafka_cluster.py, ``kafka.request.logger`` at DEBUG) with ``producer_byte_rate`` set in Kafka;
then every PRODUCE line of that client id in the leader's request log, read by the pipeline's
ingest (``parse_block``), stamped when Kafka recorded it (the line is written once the response
is sent: its time less the response's queue and send times) and replayed through the engine
(the pipeline's open-loop replay, the same quota and windows). Per request: Kafka's
``throttle_time_ms`` against the engine's.

What it cannot match to the millisecond: the log's times are whole milliseconds, and its
``recordsSizeInBytes`` leaves out the request's header and envelope (some 100 bytes) that Kafka
counts, so a throttle may differ by a millisecond or two, and a request recorded within a
millisecond of a sample's end may fall in the other sample.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from datetime import UTC
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from kafka_side_by_side import QUOTA, SideBySide, greedy_producers
from quotagate.pipeline.ingest.arrow import parse_block
from quotagate.pipeline.replay.core import replay_frame
from quotagate.protocol import api_keys
from support.kafka_cluster import KafkaCluster, kafka_cluster

LEADER = 1
"""The broker leading the topic's one partition, whose request log is read."""


def _produce_lines(cluster: KafkaCluster, client_id: str) -> list[str]:
    marker = f'"clientId":"{client_id}"'
    text = cluster.nodes[LEADER].request_log.read_text()
    return [
        line
        for line in text.splitlines()
        if marker in line and f'"requestApiKey":{api_keys.PRODUCE},' in line
    ]


def _recorded_events(lines: list[str]) -> pd.DataFrame:
    """The lines as the ingest reads them, each stamped at Kafka's recording moment."""
    events = parse_block(pa.array(lines, pa.string()), f"kafka-{LEADER}", UTC).events
    frame = events.to_pandas()
    if len(frame) != len(lines):
        raise RuntimeError(f"the ingest read {len(frame)} events of {len(lines)} lines")
    after_start_ms = []
    for line in lines:
        body = json.loads(line[line.index("{") : line.rindex("}") + 1])
        sent_for = body["responseQueueTimeMs"] + body["sendTimeMs"]
        after_start_ms.append(body["totalTimeMs"] - sent_for)
    # The ingest stamps a request when it arrived (the line's time less its total time).
    frame["ts_ms"] = frame["ts_ms"] + np.rint(np.array(after_start_ms)).astype(np.int64)
    return frame


def _apart_unordered(ts_ms: np.ndarray, kafka: np.ndarray, engine: np.ndarray) -> np.ndarray:
    """How far apart the throttles are when requests stamped within 2 ms of each other may
    have been recorded in either order: Kafka's I/O threads record several connections'
    requests at once, and the log's whole milliseconds cannot say which came first."""
    apart = np.empty_like(kafka)
    start = 0
    for end in range(1, len(ts_ms) + 1):
        if end == len(ts_ms) or ts_ms[end] - ts_ms[end - 1] > 2:
            cluster = slice(start, end)
            apart[cluster] = np.abs(np.sort(kafka[cluster]) - np.sort(engine[cluster]))
            start = end
    return apart


def _candidate(client_id: str, windows: int) -> str:
    return (
        f'[[quota]]\n"client-id" = "{client_id}"\nproducer_byte_rate = {int(QUOTA)}\n'
        f'[gateway]\n"quota.window.num" = {windows}\n"quota.window.size.seconds" = 1\n'
    )


def replay_run(
    run: SideBySide, cluster: KafkaCluster, connections: int, seconds: float, windows: int
) -> dict[str, float]:
    client_id = f"replayed-{uuid.uuid4().hex[:6]}"
    run.quota(run.kafka, {"client-id": client_id}, "producer_byte_rate", QUOTA)
    topic = run.topic([LEADER])
    achieved = greedy_producers(run.kafka, topic, client_id, connections, seconds) / QUOTA
    lines = _produce_lines(cluster, client_id)
    replayed = replay_frame(_recorded_events(lines), _candidate(client_id, windows), False)
    kafka = replayed["throttle_ms"].to_numpy(np.int64)
    engine = replayed["predicted_throttle_ms"].to_numpy(np.int64)
    apart = np.abs(kafka - engine)
    unordered = _apart_unordered(replayed["ts_ms"].to_numpy(np.int64), kafka, engine)
    worst = int(np.argmax(apart)) if len(apart) else 0
    if len(apart) and apart[worst] > 2:
        shown = ["ts_ms", "request_bytes", "throttle_ms", "predicted_throttle_ms"]
        print(replayed[shown].iloc[max(worst - 3, 0) : worst + 2].to_string(), file=sys.stderr)
    return {
        "achieved": achieved,
        "requests": float(len(apart)),
        "throttled": float(np.count_nonzero(kafka)),
        "equal": float(np.count_nonzero(apart == 0)),
        "within 2 ms": float(np.count_nonzero(apart <= 2)),
        "within 2 ms, any order": float(np.count_nonzero(unordered <= 2)),
        "most apart ms": float(apart.max()) if len(apart) else 0.0,
        "kafka throttle s": float(kafka.sum()) / 1000,
        "engine throttle s": float(engine.sum()) / 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, nargs="+", default=[5, 20])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--windows", type=int, default=2, help="quota.window.num (x 1 s)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    settings = {"quota.window.num": str(args.windows), "quota.window.size.seconds": "1"}
    with (
        tempfile.TemporaryDirectory() as tmp,
        kafka_cluster(Path(tmp) / "kafka", settings, request_log=True) as cluster,
    ):
        run = SideBySide(cluster, gateway="", repeat=1)
        print(
            "| connections | achieved ÷ quota | requests | throttled by Kafka | engine equal "
            "| within 2 ms | within 2 ms, any order | most apart (ms) "
            "| throttle s, Kafka / engine |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for connections in args.connections:
            for _ in range(args.repeat):
                seen = replay_run(run, cluster, connections, args.seconds, args.windows)
                print(
                    f"| {connections} | {seen['achieved']:.3f} | {seen['requests']:.0f} "
                    f"| {seen['throttled']:.0f} | {seen['equal']:.0f} "
                    f"| {seen['within 2 ms']:.0f} | {seen['within 2 ms, any order']:.0f} "
                    f"| {seen['most apart ms']:.0f} "
                    f"| {seen['kafka throttle s']:.1f} / {seen['engine throttle s']:.1f} |",
                    flush=True,
                )
        print(f"\n{args.windows} x 1 s windows, {int(QUOTA)} B/s, {args.seconds:.0f} s measures")


if __name__ == "__main__":
    main()
