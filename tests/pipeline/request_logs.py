"""Kafka request logs written as brokers write them, for the ingest and end-to-end tests.

Two formats: the text line of Kafka 2.x (``RequestHeader(…) -- {…},response:{…} from
connection …;totalTime:…``; produce sizes only at TRACE) and the KIP-673 JSON line of
Kafka >= 2.8. A seeded stream of requests of a few principals and many clients, with
produce, fetch (consumers and followers), metadata, admin mutations (some failing), and
a sprinkling of other loggers' lines and broken lines, so that every ingest bucket fills.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

_TEXT_NAMES = {0: "PRODUCE", 1: "FETCH", 3: "METADATA", 19: "CREATE_TOPICS", 20: "DELETE_TOPICS"}
_INFO = "INFO [Log partition=t-0, dir=/data] Loading producer state (kafka.log.Log)"


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker's log: its file name, its format and the principals it serves."""

    name: str
    json_format: bool
    principals: tuple[str, ...]
    clients_per_principal: int = 6


def write_logs(
    out: Path, brokers: list[Broker], *, lines: int, seed: int, start_ms: int = 1_714_986_000_000
) -> Path:
    """``lines`` request-log lines per broker under ``out`` (one file each); returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for index, broker in enumerate(brokers):
        rng = random.Random(f"{seed}-{index}")
        now = start_ms
        with (out / f"{broker.name}.log").open("w") as log:
            for _ in range(lines):
                now += rng.randint(0, 40)
                log.write(_line(rng, broker, now) + "\n")
    return out


def _line(rng: random.Random, broker: Broker, now_ms: int) -> str:
    roll = rng.random()
    stamp = _stamp(now_ms)
    if roll < 0.01:
        return f"{stamp} {_INFO}"
    if roll < 0.015:
        return f"{stamp} DEBUG Completed request:" + (
            '{"requestHeader":{' if broker.json_format else "RequestHeader(apiKey=PRODUCE, api"
        )
    principal = rng.choice(broker.principals)
    user = principal.split(":", 1)[1]
    client = rng.randrange(broker.clients_per_principal)
    role = ("producer", "consumer", "admin")[client % 3]
    request = _request(rng, role)
    request["client_id"] = f"{role}-{user}-{client}"
    request["principal"] = principal
    request["host"] = f"10.1.{client}.{rng.randint(1, 3)}:{40000 + client}"
    body = _json_body(request) if broker.json_format else _text_body(request)
    return f"{stamp} DEBUG Completed request:{body} (kafka.request.logger)"


def _stamp(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("[%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}]"


def _request(rng: random.Random, role: str) -> dict[str, object]:
    """The facts of one request, rendered by either format."""
    facts: dict[str, object] = {
        "total_ms": round(rng.uniform(0.2, 30.0), 3),
        "local_ms": round(rng.uniform(0.05, 3.0), 3),
        "throttle_ms": rng.choice([0, 0, 0, 0, 0, 0, 0, 0, 120, 35]),
    }
    if role == "producer":
        kind = rng.choice([0, 0, 0, 0, 3])
        if kind == 0:
            facts["topics"] = [
                (f"topic-{t}", [rng.randint(10, 20_000) for _ in range(rng.randint(1, 3))])
                for t in rng.sample(range(5), rng.randint(1, 2))
            ]
            facts["acks"] = rng.choice([-1, 1, 0])
            facts["trace"] = rng.random() < 0.7
    elif role == "consumer":
        kind = rng.choice([1, 1, 1, 1, 3])
        if kind == 1:
            facts["sizes"] = [rng.randint(0, 60_000) for _ in range(rng.randint(1, 3))]
            facts["replica"] = 2 if rng.random() < 0.05 else -1
    else:
        kind = rng.choice([19, 20, 3])
        if kind in (19, 20):
            facts["admin"] = [
                (f"t-{rng.randrange(1000)}", rng.choice([-1, 1, 3, 6]), rng.choice([0, 0, 0, 36]))
                for _ in range(rng.randint(1, 3))
            ]
            facts["validate"] = rng.random() < 0.1
    facts["api"] = kind
    return facts


def _text_body(r: dict[str, object]) -> str:
    api = int(r["api"])  # type: ignore[call-overload]
    version = {0: 8, 1: 11, 3: 9, 19: 5, 20: 4}[api]
    header = (
        f"RequestHeader(apiKey={_TEXT_NAMES[api]}, apiVersion={version}, "
        f"clientId={r['client_id']}, correlationId=7)"
    )
    request, response = "{}", "{throttle_time_ms=0}"
    if api == 0:
        topics = r["topics"]
        assert isinstance(topics, list)
        if r["trace"]:
            sizes = ",".join(
                f"{name}-{p}={size}" for name, parts in topics for p, size in enumerate(parts)
            )
            request = f"{{acks={r['acks']},timeout=30000,partitionSizes=[{sizes}]}}"
        else:
            request = f"{{acks={r['acks']},timeout=30000,numPartitions={len(topics)}}}"
    elif api == 1:
        sizes_list = r["sizes"]
        assert isinstance(sizes_list, list)
        sets = ",".join(
            f"{{partition_header={{partition={i},error_code=0}},record_set=MemoryRecords("
            f"size={size}, buffer=java.nio.HeapByteBuffer[pos=0 lim={size} cap={size}])}}"
            for i, size in enumerate(sizes_list)
        )
        request = f"{{replica_id={r['replica']},max_wait_time=500,topics=[{{topic=t}}]}}"
        response = (
            f"{{throttle_time_ms=0,error_code=0,responses=[{{topic=t,partitions=[{sets}]}}]}}"
        )
    elif api in (19, 20):
        admin = r["admin"]
        assert isinstance(admin, list)
        validate = "true" if r["validate"] else "false"
        if api == 19:
            request = (
                "{topics=["
                + ",".join(
                    f"{{name={n},num_partitions={p},replication_factor=3,assignments=[],configs=[]}}"
                    for n, p, _ in admin
                )
                + f"],timeout_ms=30000,validate_only={validate}}}"
            )
            response = (
                "{throttle_time_ms=0,topics=["
                + ",".join(f"{{name={n},error_code={e},error_message=null}}" for n, _, e in admin)
                + "]}"
            )
        else:
            request = "{topic_names=[" + ",".join(n for n, _, _ in admin) + "],timeout_ms=30000}"
            response = (
                "{throttle_time_ms=0,responses=["
                + ",".join(f"{{name={n},error_code={e}}}" for n, _, e in admin)
                + "]}"
            )
    else:
        request = "{topics=[{name=orders}],allow_auto_topic_creation=true}"
    metrics = (
        f"totalTime:{r['total_ms']},requestQueueTime:0.05,localTime:{r['local_ms']},"
        f"remoteTime:0.5,throttleTime:{r['throttle_ms']},responseQueueTime:0.02,sendTime:0.1,"
        f"securityProtocol:SASL_SSL,principal:{r['principal']},listener:SASL_SSL,"
        "clientInformation:ClientInformation(softwareName=apache-kafka-java, softwareVersion=2.7.0)"
    )
    connection = f"10.0.0.5:9092-{r['host']}-3"
    return f"{header} -- {request},response:{response} from connection {connection};{metrics}"


def _json_body(r: dict[str, object]) -> str:
    api = int(r["api"])  # type: ignore[call-overload]
    version = {0: 9, 1: 16, 3: 12, 19: 7, 20: 6}[api]
    request: dict[str, object] = {}
    response: dict[str, object] = {"throttleTimeMs": 0}
    if api == 0:
        topics = r["topics"]
        assert isinstance(topics, list)
        request = {
            "acks": r["acks"],
            "timeoutMs": 30000,
            "topicData": [
                {
                    "name": name,
                    "partitionData": [
                        {"index": p, "recordsSizeInBytes": size} for p, size in enumerate(parts)
                    ],
                }
                for name, parts in topics
            ],
        }
    elif api == 1:
        sizes = r["sizes"]
        assert isinstance(sizes, list)
        request = {"replicaState": {"replicaId": r["replica"], "replicaEpoch": -1}, "topics": []}
        response["responses"] = [
            {
                "topicId": "xD4mI0WqRWOT8n0-nVlGnw",
                "partitions": [
                    {"partitionIndex": i, "errorCode": 0, "recordsSizeInBytes": size}
                    for i, size in enumerate(sizes)
                ],
            }
        ]
    elif api in (19, 20):
        admin = r["admin"]
        assert isinstance(admin, list)
        if api == 19:
            request = {
                "topics": [
                    {"name": n, "numPartitions": p, "replicationFactor": 3, "assignments": []}
                    for n, p, _ in admin
                ],
                "validateOnly": bool(r["validate"]),
            }
            response["topics"] = [
                {"name": n, "errorCode": e, "numPartitions": 3 if p == -1 else p}
                for n, p, e in admin
            ]
        else:
            request = {"topics": [{"name": n} for n, _, _ in admin]}
            response["responses"] = [{"name": n, "errorCode": e} for n, _, e in admin]
    else:
        request = {"topics": [{"name": "orders"}], "allowAutoTopicCreation": True}
    document = {
        "isForwarded": False,
        "requestHeader": {
            "requestApiKey": api,
            "requestApiVersion": version,
            "correlationId": 7,
            "clientId": r["client_id"],
        },
        "request": request,
        "response": response,
        "connection": f"10.0.0.6:9092-{r['host']}-4",
        "totalTimeMs": r["total_ms"],
        "requestQueueTimeMs": 0.05,
        "localTimeMs": r["local_ms"],
        "remoteTimeMs": 0.5,
        "throttleTimeMs": r["throttle_ms"],
        "securityProtocol": "SASL_PLAINTEXT",
        "principal": r["principal"],
        "listener": "CLIENTS",
    }
    return json.dumps(document, separators=(",", ":"))
