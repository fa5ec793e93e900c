"""Kafka's own throttles, replayed: given the requests as a Kafka broker logged them, does the
engine throttle each one as the broker did?

    python benchmarks/kafka_log_replay.py [--connections 5 20] [--seconds 16]
        [--fetch [--fetch-bytes N]]

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

``--fetch`` asks the same of greedy consumers (librdkafka, ``max.partition.fetch.bytes`` 16384
or ``--fetch-bytes``, N connections of one client id reading a filled topic under
``consumer_byte_rate``). A throttled fetch's line shows the empty answer Kafka sent, not the
response it read, recorded and took back: that response is the one the same connection reads
at the same offset once its mute is over (the topic no longer changes), and the response's
envelope beyond its records is the size of a one-partition response at the logged version.

What it cannot match to the millisecond: the log's times are whole milliseconds, and its
``recordsSizeInBytes`` leaves out the request's header and envelope (some 100 bytes) that Kafka
counts, so a throttle may differ by a millisecond or two, and a request recorded within a
millisecond of a sample's end may fall in the other sample.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from kio.schema.errors import ErrorCode

from kafka_side_by_side import (
    QUOTA,
    SMALL_BATCH,
    WARM_UP_S,
    SideBySide,
    consumers,
    greedy_producers,
    preload,
)
from quotagate.enforcement.fetch import kafka_fetch_size
from quotagate.pipeline.ingest.arrow import parse_block
from quotagate.pipeline.replay.core import replay_frame
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.kio_nested import build, nested
from support.kafka_cluster import KafkaCluster, kafka_cluster

LEADER = 1
"""The broker leading the topic's one partition, whose request log is read."""


def _lines(cluster: KafkaCluster, client_id: str, api_key: int) -> list[str]:
    marker = f'"clientId":"{client_id}"'
    text = cluster.nodes[LEADER].request_log.read_text()
    return [
        line
        for line in text.splitlines()
        if marker in line and f'"requestApiKey":{api_key},' in line
    ]


def _body(line: str) -> dict[str, Any]:
    return dict(json.loads(line[line.index("{") : line.rindex("}") + 1]))


def _recorded_events(lines: list[str]) -> pd.DataFrame:
    """The lines as the ingest reads them, each stamped at Kafka's recording moment."""
    events = parse_block(pa.array(lines, pa.string()), f"kafka-{LEADER}", UTC).events
    frame = events.to_pandas()
    if len(frame) != len(lines):
        raise RuntimeError(f"the ingest read {len(frame)} events of {len(lines)} lines")
    after_start_ms = []
    for line in lines:
        body = _body(line)
        sent_for = body["responseQueueTimeMs"] + body["sendTimeMs"]
        after_start_ms.append(body["totalTimeMs"] - sent_for)
    # The ingest stamps a request when it arrived (the line's time less its total time).
    frame["ts_ms"] = frame["ts_ms"] + np.rint(np.array(after_start_ms)).astype(np.int64)
    return frame


def _fetch_overhead(api_version: int) -> int:
    """What Kafka counts of a one-partition fetch response beyond its records
    (``FetchResponse.sizeOf``: 4 + the body), at the version the log names: the log keeps
    only ``recordsSizeInBytes``. Within a byte or two of Kafka's own (its varints)."""
    schema: Any = api_table.response_schema(api_keys.FETCH, api_version)
    records = b"r" * SMALL_BATCH
    partition = build(
        nested(schema, "PartitionData"),
        partition_index=0,
        error_code=ErrorCode(0),
        high_watermark=1 << 20,
        last_stable_offset=1 << 20,
        log_start_offset=0,
        aborted_transactions=(),
        records=records,
    )
    topic_fields: dict[str, Any] = {"partitions": (partition,)}
    if api_version >= 13:
        topic_fields["topic_id"] = uuid.uuid4()
    else:
        topic_fields["topic"] = "t"
    body = build(
        schema,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode(0),
        session_id=0,
        responses=(build(nested(schema, "FetchableTopicResponse"), **topic_fields),),
    )
    frame = codec.encode_response_frame(body, 1)
    return kafka_fetch_size(frame, api_version) - len(records)


def _with_refused_sizes(frame: pd.DataFrame, lines: list[str]) -> pd.DataFrame:
    """Fetch events charged as Kafka charged them: a throttled fetch's log line shows the
    empty answer, but Kafka recorded (and took back) the response it had read, which the
    same connection reads again at the same offset once its mute is over, from a log that
    no longer changes. Fetches never read again (the run's last) are left out."""
    keys = []
    for line in lines:
        body = _body(line)
        partitions = body["request"]["topics"][0]["partitions"]
        keys.append((body["connection"], partitions[0]["fetchOffset"]))
    sizes = frame["response_bytes"].to_numpy(np.int64).copy()
    read: dict[tuple[str, int], int] = {}
    for index in range(len(keys) - 1, -1, -1):
        if sizes[index] > 0:
            read[keys[index]] = int(sizes[index])
        else:
            sizes[index] = read.get(keys[index], 0)
    overhead = _fetch_overhead(int(frame["api_version"].iloc[0]))
    charged = frame.assign(response_bytes=np.where(sizes > 0, sizes + overhead, 0))
    return charged[sizes > 0].reset_index(drop=True)


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


def _candidate(client_id: str, windows: int, key: str) -> str:
    return (
        f'[[quota]]\n"client-id" = "{client_id}"\n{key} = {int(QUOTA)}\n'
        f'[gateway]\n"quota.window.num" = {windows}\n"quota.window.size.seconds" = 1\n'
    )


def replay_run(
    run: SideBySide,
    cluster: KafkaCluster,
    connections: int,
    seconds: float,
    windows: int,
    loaded: str | None = None,
    fetch_bytes: int = SMALL_BATCH,
) -> dict[str, float]:
    """Greedy producers, or with ``loaded`` (a filled topic) greedy consumers fetching up to
    ``fetch_bytes`` a time, straight at Kafka; their requests replayed from the leader's
    request log."""
    client_id = f"replayed-{uuid.uuid4().hex[:6]}"
    key = "consumer_byte_rate" if loaded else "producer_byte_rate"
    run.quota(run.kafka, {"client-id": client_id}, key, QUOTA)
    if loaded is None:
        topic = run.topic([LEADER])
        achieved = greedy_producers(run.kafka, topic, client_id, connections, seconds) / QUOTA
        lines = _lines(cluster, client_id, api_keys.PRODUCE)
        events = _recorded_events(lines)
    else:
        fetch = {"max.partition.fetch.bytes": fetch_bytes}
        achieved = consumers(run.kafka, loaded, client_id, connections, seconds, fetch) / QUOTA
        lines = _lines(cluster, client_id, api_keys.FETCH)
        events = _with_refused_sizes(_recorded_events(lines), lines)
    candidate = _candidate(client_id, windows, key)
    replayed = replay_frame(events, candidate, False)
    earlier_ms, early_as_stamped, early_started_earlier = _first_sample_earlier(
        events, candidate, replayed
    )
    kafka = replayed["throttle_ms"].to_numpy(np.int64)
    engine = replayed["predicted_throttle_ms"].to_numpy(np.int64)
    apart = np.abs(kafka - engine)
    unordered = _apart_unordered(replayed["ts_ms"].to_numpy(np.int64), kafka, engine)
    worst = int(np.argmax(apart)) if len(apart) else 0
    if len(apart) and apart[worst] > 2:
        shown = ["ts_ms", "request_bytes", "response_bytes", "throttle_ms", "predicted_throttle_ms"]
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
        "kafka admitted": _admitted_rate(replayed, kafka == 0, seconds),
        "engine admitted": _admitted_rate(replayed, engine == 0, seconds),
        "first sample earlier ms": float(earlier_ms),
        "first seconds within 2 ms": early_as_stamped,
        "first seconds within 2 ms, started earlier": early_started_earlier,
    }


def _first_sample_earlier(
    events: pd.DataFrame, candidate: str, as_stamped: pd.DataFrame
) -> tuple[int, float, float]:
    """How long before the log's stamp of the client's first request Kafka began its first
    sample, as best the first seconds tell: the replay is started that much earlier with a
    recording of no bytes (a sample begins at its first recording), for each candidate in
    0-60 ms; the one whose throttles in the first ``WARM_UP_S`` seconds agree most with
    Kafka's (within 2 ms), and that share as stamped (``as_stamped``: the events' replay) and
    started earlier. Kafka takes its quota time inside a request's handling, the log stamps
    it as its response is queued: for a new client's first requests, whose handling is slow,
    these lie tens of ms apart."""
    if events.empty:
        return 0, 1.0, 1.0
    first_index = events["ts_ms"].idxmin()
    start_ms = int(events.at[first_index, "ts_ms"])

    def agreement(replayed: pd.DataFrame) -> float:
        first = replayed["ts_ms"].to_numpy(np.int64) < start_ms + WARM_UP_S * 1000
        apart = np.abs(replayed["throttle_ms"] - replayed["predicted_throttle_ms"]).to_numpy()
        return float(np.mean(apart[first] <= 2))

    agreements = {0: agreement(as_stamped)}
    for earlier in range(5, 61, 5):
        opening = events.loc[[first_index]].assign(
            ts_ms=start_ms - earlier, request_bytes=0, response_bytes=0
        )
        replayed = replay_frame(pd.concat([opening, events], ignore_index=True), candidate, False)
        agreements[earlier] = agreement(replayed.drop(index=replayed["ts_ms"].idxmin()))
    best = max(agreements, key=lambda earlier: (agreements[earlier], -earlier))
    return best, agreements[0], agreements[best]


def _admitted_rate(replayed: pd.DataFrame, admitted: np.ndarray, seconds: float) -> float:
    """What the requests admitted in the measure (after the warm-up) charged, ÷ the quota:
    request bytes for produce, response bytes for fetch."""
    ts_ms = replayed["ts_ms"].to_numpy(np.int64)
    start = ts_ms.min() + WARM_UP_S * 1000 if len(ts_ms) else 0
    inside = admitted & (ts_ms >= start) & (ts_ms < start + seconds * 1000)
    charged = replayed["request_bytes"] + replayed["response_bytes"]
    return float(charged.to_numpy(np.int64)[inside].sum()) / seconds / QUOTA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, nargs="+", default=[5, 20])
    parser.add_argument("--seconds", type=float, default=16.0)
    parser.add_argument("--windows", type=int, default=2, help="quota.window.num (x 1 s)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--fetch", action="store_true", help="greedy consumers, not producers")
    parser.add_argument(
        "--fetch-bytes",
        type=int,
        default=SMALL_BATCH,
        help="the consumers' max.partition.fetch.bytes (1048576: librdkafka's default, whose "
        "responses Kafka caps at the quota's one window)",
    )
    args = parser.parse_args()
    settings = {"quota.window.num": str(args.windows), "quota.window.size.seconds": "1"}
    with (
        tempfile.TemporaryDirectory() as tmp,
        kafka_cluster(Path(tmp) / "kafka", settings, request_log=True) as cluster,
    ):
        run = SideBySide(cluster, gateway="", repeat=1)
        loaded = None
        if args.fetch:
            loaded = run.topic([LEADER])
            preload(
                run.kafka, loaded, int(QUOTA * (WARM_UP_S + args.seconds + 2) * 1.5), SMALL_BATCH
            )
        print(
            "| connections | achieved ÷ quota | requests | throttled by Kafka | engine equal "
            "| within 2 ms | within 2 ms, any order | most apart (ms) "
            "| throttle s, Kafka / engine | admitted ÷ quota, Kafka / engine "
            "| Kafka's first sample earlier (ms) | within 2 ms in the first 5 s, as stamped / "
            "started earlier |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for connections in args.connections:
            for _ in range(args.repeat):
                seen = replay_run(
                    run, cluster, connections, args.seconds, args.windows, loaded, args.fetch_bytes
                )
                print(
                    f"| {connections} | {seen['achieved']:.3f} | {seen['requests']:.0f} "
                    f"| {seen['throttled']:.0f} | {seen['equal']:.0f} "
                    f"| {seen['within 2 ms']:.0f} | {seen['within 2 ms, any order']:.0f} "
                    f"| {seen['most apart ms']:.0f} "
                    f"| {seen['kafka throttle s']:.1f} / {seen['engine throttle s']:.1f} "
                    f"| {seen['kafka admitted']:.3f} / {seen['engine admitted']:.3f} "
                    f"| {seen['first sample earlier ms']:.0f} "
                    f"| {seen['first seconds within 2 ms']:.2f} / "
                    f"{seen['first seconds within 2 ms, started earlier']:.2f} |",
                    flush=True,
                )
        print(f"\n{args.windows} x 1 s windows, {int(QUOTA)} B/s, {args.seconds:.0f} s measures")


if __name__ == "__main__":
    main()
