"""The vectorized ingest against the Python reference parser (``ingest.parse_line``), line
by line: the same bucket, the same reason and the same event for every line of the
fixtures, of generated logs of both formats and of lines no broker writes; and the
reading of log files in pieces, as Spark's text reader splits them into lines."""

from __future__ import annotations

import json
import re
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.ingest import arrow as ingest_arrow
from quotagate.pipeline.ingest import read as ingest_read
from quotagate.pipeline.ingest.arrow import REST_SCHEMA, parse_block
from quotagate.pipeline.ingest.job import _bucket_metrics, _samples, gateway_of, ingest, parse_line
from quotagate.pipeline.ingest.read import Piece, deal_pieces, read_lines
from quotagate.pipeline.ingest.task import IngestJob, run_task
from quotagate.usage.schema import USAGE_SCHEMA
from support.ingest_rows import Row, ordered, reference

from ..conftest import FIXTURES
from ..request_logs import Broker, write_logs


def spark_lines(data: bytes) -> list[str]:
    """The lines of a file as Spark's text reader ends them, decoded as ingest decodes."""
    pieces = re.split(rb"\r\n|\r|\n", data)
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return [piece.decode("utf-8", "replace") for piece in pieces]


def vectorized(path: Path, tz: timezone) -> tuple[list[Row], list[Row]]:
    events: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for lines in read_lines(Piece(str(path), 0, -1)):
        block = parse_block(lines, gateway_of(path.as_uri()), tz)
        assert block.events.schema == USAGE_SCHEMA
        events += block.events.to_pylist()
        rest += block.rest.to_pylist()
    return ordered(events), ordered(rest)


def assert_alike(path: Path, tz: timezone = UTC) -> tuple[list[Row], list[Row]]:
    expected = reference(spark_lines(path.read_bytes()), gateway_of(path.as_uri()), tz)
    got = vectorized(path, tz)
    assert got[1] == expected[1]
    assert got[0] == expected[0]
    return got


class _Counted:
    """The reference parser, counting the lines the vectorized parse hands it."""

    def __init__(self) -> None:
        self.lines = 0

    def __call__(self, line: str, gateway_id: str, tz: timezone = UTC) -> dict[str, Any]:
        self.lines += 1
        return parse_line(line, gateway_id, tz)


@pytest.mark.parametrize("tz", [UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=5))])
def test_fixtures_parse_alike(tz: timezone) -> None:
    for path in sorted([*(FIXTURES / "logs").iterdir(), FIXTURES / "kafka-4.3" / "request.log"]):
        events, rest = assert_alike(path.resolve(), tz)
        assert events and rest


def test_generated_logs_parse_alike_and_mostly_without_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted()
    monkeypatch.setattr(ingest_arrow, "parse_line", counted)
    brokers = [
        Broker("broker-1", json_format=False, principals=("User:alice", "User:CN=x,OU=y")),
        Broker("broker-2", json_format=True, principals=("User:bob", "User:carol")),
    ]
    logs = write_logs(tmp_path, brokers, lines=4000, seed=5)
    facts = []
    for path in sorted(logs.iterdir()):
        events, rest = assert_alike(path)
        assert {dict(r)["status"] for r in rest} == {"error", "other"}
        assert sum(dict(e)["partition_mutations"] for e in events) > 0
        facts += [dict(e) for e in events]
    # Every kind of fact the parsers read is there to compare.
    assert {e["api_key"] for e in facts} == {0, 1, 3, 19, 20}
    assert any(e["topics"] for e in facts) and any(e["follower"] for e in facts)
    assert any(e["acks"] == 0 for e in facts) and any(e["throttle_ms"] for e in facts)
    assert any(e["validate_only"] for e in facts)
    # Only the broken lines (about 0.5 % of them) went through the reference.
    assert 0 < counted.lines < 0.01 * 8000


_STAMP = "[2024-05-06 09:00:01,002] DEBUG Completed request:"
_SUFFIX = " (kafka.request.logger)"


def _json(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "requestHeader": {"requestApiKey": 0, "requestApiVersion": 9, "clientId": "p"},
        "request": {
            "acks": 1,
            "topicData": [{"name": "a", "partitionData": [{"recordsSizeInBytes": 10}]}],
        },
        "response": {"throttleTimeMs": 0},
        "connection": "10.0.0.6:9092-10.1.2.4:50412-7",
        "totalTimeMs": 2.5,
        "localTimeMs": 0.0005,
        "throttleTimeMs": 3.9,
        "principal": "User:bob",
        "listener": "L",
    }
    document.update(changes)
    return document


def _json_line(document: dict[str, Any] | str) -> str:
    body = document if isinstance(document, str) else json.dumps(document)
    return _STAMP + body + _SUFFIX


def _text_line(request: str, response: str, *, api: str = "PRODUCE", extra: str = "") -> str:
    return (
        f"{_STAMP}RequestHeader(apiKey={api}, apiVersion=8, clientId=c, correlationId=1) -- "
        f"{request},response:{response} from connection 1.2.3.4:9092-5.6.7.8:1-2;"
        f"totalTime:1.5,requestQueueTime:0.1,localTime:0.2505,remoteTime:0,throttleTime:7"
        f",securityProtocol:SSL,principal:User:a,listener:SSL{extra}{_SUFFIX}"
    )


_CREATE = {"requestApiKey": 19, "requestApiVersion": 7, "clientId": "admin"}
_DELETE = {"requestApiKey": 20, "requestApiVersion": 6, "clientId": "admin"}
_TOPICS = [{"name": "x", "numPartitions": 3}, {"name": "y", "numPartitions": -1}]
BROKER_LINES = [
    # Lines a broker writes, in shapes the generated logs do not have: parsed vectorized.
    _json_line(_json()),
    _json_line(_json(request=None)),
    _json_line(_json(request={"topicData": [{"topicId": "id-1", "partitionData": []}]})),
    _json_line(_json(request={"topicData": [{"name": "", "topicId": ""}]})),
    _json_line(
        _json(
            requestHeader={"requestApiKey": 1, "requestApiVersion": 11, "clientId": None},
            request={"replicaId": 3},
            response={"responses": [{"partitions": [{"recordsSizeInBytes": 5}]}]},
            listener=None,
        )
    ),
    _json_line(
        _json(
            requestHeader={"requestApiKey": 1, "requestApiVersion": 16},
            request={"replicaState": {}, "replicaId": 4},
        )
    ),
    _json_line(
        _json(
            requestHeader=_CREATE,
            request={"topics": _TOPICS, "validateOnly": True},
            response={"topics": [{"name": "x", "errorCode": 0}, {"name": "y", "numPartitions": 0}]},
        )
    ),
    _json_line(_json(requestHeader=_CREATE, request={"topics": _TOPICS})),
    _json_line(
        _json(
            requestHeader=_CREATE,
            request={"topics": [{"name": "x", "assignments": [{"partitionIndex": 0}] * 2}]},
            response={"topics": [], "results": [{"name": "x", "numPartitions": 5}]},
        )
    ),
    _json_line(
        _json(
            requestHeader=_DELETE,
            request={"topicNames": ["a", "b"]},
            response={"responses": [{"name": "a"}, {"name": "b", "errorCode": 3}]},
        )
    ),
    _json_line(_json(requestHeader=_DELETE, request={"topics": [{"name": "a"}]}, response=None)),
    _json_line(
        _json(
            requestHeader=_DELETE,
            request={"topicData": []},
            response={"responses": [{"partitions": [{"recordsSizeInBytes": 1}]}, None]},
        )
    ),
    _json_line(_json(requestHeader=_CREATE, request={"topics": []}, response={"topics": [{}]})),
    _text_line("{acks=0,partitionSizes=[a-0=5,b-b-1=7,a-2=1]}", "{}"),
    _text_line("{acks=-1,numPartitions=1}", "{}", extra=",clientInformation:X(y=1)"),
    _text_line("{replicaId=2}", "{r=Records(size=5),s=FileRecords(size=7, x)}", api="FETCH"),
    _text_line(
        "{topics=[{name=a,num_partitions=3},{name=b,num_partitions=-1}],validateOnly=true}",
        "{topics=[{name=a,error_code=0},{name=b,errorCode=0}]}",
        api="CREATE_TOPICS",
    ),
    _text_line("{topics=[{name=a,numPartitions=3}]}", "{}", api="CREATE_TOPICS"),
    _text_line("{topic_names=[a,b]}", "{}", api="DELETE_TOPICS"),
    _text_line("{topic_names=[a,b]}", "{r=[{error_code=0},{error_code=-1}]}", api="DELETE_TOPICS"),
    _text_line("{}", "{}").replace("throttleTime:7", "throttleTime:7.9"),
    "[2024-05-06T09:00:01.5] TRACE x Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[2024-05-06 09:00:01] DEBUG Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[2024-02-29 23:59:59,999] DEBUG Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[1969-12-31 23:59:59,999] DEBUG Completed request:" + json.dumps(_json()) + _SUFFIX,
]
ODD_LINES = [
    # Lines the vectorized parse hands to the reference.
    _json_line(
        _json(
            requestHeader=_DELETE,
            request={"topicNames": ["a", "b"]},
            response={"responses": [{"name": "b"}, {"name": "a"}]},
        )
    ),
    _json_line(
        _json(
            requestHeader=_DELETE,
            request={"topicNames": ["a"]},
            response={"responses": [{"name": "a"}, {"name": "a", "errorCode": 1}]},
        )
    ),
    _json_line(
        _json(requestHeader=_DELETE, request={"topicNames": ["a"]}, response={"results": []})
    ),
    _json_line(_json(request={"topicData": [None, {"name": "b"}]})),
    _json_line(_json(request={"acks": "all"})),
    _json_line(
        _json(
            request={
                "topicData": [{"name": "a", "partitionData": [{"x": {"recordsSizeInBytes": 4}}]}]
            }
        )
    ),
    _json_line(_json(response={"recordsSizeInBytes": 9})),
    _json_line(_json(requestHeader={"apiKey": "PRODUCE", "apiVersion": 9})),
    _json_line(_json(requestHeader={"requestApiKey": True, "requestApiVersion": 9})),
    _json_line(_json(requestHeader={"requestApiKey": 0, "requestApiVersion": 9, "clientId": 7})),
    _json_line(_json(principal=None)),
    _json_line(_json(totalTimeMs="1")),
    _json_line(_json(requestHeader=[])),
    _json_line(_json(clientId="ignored", listener="caf\u00e9")),
    _json_line(_json(principal='User:"quoted" \\ \u0041')),
    _json_line(
        '{"requestHeader":{"requestApiKey":0,"requestApiVersion":1},"principal":"a","principal":"b"}'
    ),
    _json_line('{"requestHeader":{"requestApiKey":0,"requestApiVersion":1}} {"x":1}'),
    _json_line("{not json}"),
    _json_line("{}"),
    _json_line("[1, 2]"),
    _STAMP + json.dumps(_json()),  # no logger suffix
    _STAMP + json.dumps(_json()) + "   " + _SUFFIX,
    _STAMP + "  " + json.dumps(_json()) + _SUFFIX,
    _STAMP + json.dumps(_json()) + _SUFFIX + "  ",
    _STAMP + json.dumps(_json()) + " (kafka.server.KafkaApis)",
    _STAMP + json.dumps(_json()) + " Completed request:" + _SUFFIX,
    "[2024-05-06 09:00:01,002]\tDEBUG  Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[2023-02-29 10:00:00,000] DEBUG Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[2024-05-06 23:59:60,000] DEBUG Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[2024-13-06 10:00:00,000] DEBUG Completed request:" + json.dumps(_json()) + _SUFFIX,
    "[2024-05-06 09:00:01,002] DEBUG no marker here" + _SUFFIX,
    "",
    "   ",
    "Completed request:" + json.dumps(_json()) + _SUFFIX,
    _text_line("{}", "{}", api="NOT_AN_API"),
    _text_line("{}", "{} from connection x", api="METADATA"),
    _text_line("{}", "{}", extra=",totalTime:1.2.3"),
    _text_line("{}", "{}").replace(",principal:User:a,listener:SSL", ""),
    _text_line("{}", "{}").replace("clientId=c", "clientId=c) -- x"),
    _text_line("{}", "{}").replace("clientId=c", "clientId=\u00e9t\u00e9"),
    _text_line("{}", "{}").replace(";totalTime", "totalTime"),
]


def test_lines_of_other_shapes_parse_as_the_reference_parses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted()
    monkeypatch.setattr(ingest_arrow, "parse_line", counted)
    path = tmp_path / "broker-9.log"
    path.write_text("\n".join(BROKER_LINES) + "\n")
    events, rest = assert_alike(path)
    assert (len(events), len(rest), counted.lines) == (len(BROKER_LINES), 0, 0)
    path.write_text("\n".join(ODD_LINES) + "\n")
    events, rest = assert_alike(path)
    assert len(events) > 10 and len(rest) > 15


def test_lines_end_as_in_spark_and_bytes_that_are_not_utf8_read_as_replacements(
    tmp_path: Path,
) -> None:
    good = _json_line(_json())
    data = (
        good.encode() + b"\r\n" + good.encode() + b"\r" + good.encode() + b"\n"
        + b"\xff\xfe broken \xc3\n"
        + _text_line("{}", "{}").replace("clientId=c", "clientId=\xe9").encode("latin-1")
        + b"\n\n" + good.encode()
    )  # fmt: skip
    path = tmp_path / "broker-3.log"
    path.write_bytes(data)
    events, rest = assert_alike(path)
    assert len(events) == 5  # the latin-1 client id's line is one too
    assert len(rest) == 2  # the empty line and the broken one


def test_a_file_cut_anywhere_is_read_once_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = write_logs(tmp_path / "logs", [Broker("b", True, ("User:a",))], lines=300, seed=1)
    path = logs / "b.log"
    with path.open("a") as log:
        log.write("[2024-05-06 10:00:00,000] INFO " + "x" * 50_000 + "\r\nlast line, no line end")
    expected = spark_lines(path.read_bytes())
    monkeypatch.setattr(ingest_read, "BLOCK_BYTES", 4096)
    for piece_bytes in (1, 100, 4095, 4096, 7000, 10**9):
        monkeypatch.setattr(ingest_read, "MIN_PIECE_BYTES", piece_bytes)
        for tasks in (1, 3, 64):
            dealt = deal_pieces([path], tasks)
            pieces = sorted((p for task in dealt for p in task), key=lambda p: p.start)
            read = [
                line
                for piece in pieces
                for block in read_lines(piece)
                for line in block.to_pylist()
            ]
            assert read == expected, (piece_bytes, tasks)


def test_pieces_are_dealt_by_size_and_tasks_left_without_one_count_no_line(
    tmp_path: Path,
) -> None:
    small, large = tmp_path / "small.log", tmp_path / "large.log.gz"
    small.write_text("a\n")
    large.write_bytes(b"\x1f\x8b" + b"x" * 100)
    dealt = deal_pieces([small, large], 4)
    assert [len(task) for task in dealt] == [1, 1, 0, 0]
    assert dealt[0][0].path.endswith("large.log.gz") and dealt[0][0].end == -1
    job = IngestJob(dealt, str(tmp_path / "events"), UTC)
    empty = pa.Table.from_batches(list(run_task(job, 3)))
    expected = {"status": "ok", "reason": None, "line": None, "lines": 0, "bucket": 0}
    assert empty.to_pylist() == [expected]


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_compressed_logs_are_read_whole(tmp_path: Path, suffix: str) -> None:
    import bz2  # noqa: PLC0415
    import gzip  # noqa: PLC0415

    lines = [_json_line(_json()), "other", _text_line("{}", "{}")]
    path = tmp_path / f"broker-4.log{suffix}"
    compress = gzip.compress if suffix == ".gz" else bz2.compress
    path.write_bytes(compress(("\n".join(lines) + "\n").encode()))
    assert [len(task) for task in deal_pieces([path], 2)] == [1, 0]
    got = [line for block in read_lines(Piece(str(path), 0, -1)) for line in block.to_pylist()]
    assert got == lines
    block = parse_block(pa.array(got), gateway_of(path.as_uri()), UTC)
    assert block.events.num_rows == 2


@pytest.mark.spark
def test_ingest_writes_the_reference_events_and_samples(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The whole stage on Spark: the events read back, the counts and the samples are what
    the reference parse of every line gives (samples through the very same sampling)."""
    brokers = [
        Broker("broker-1", json_format=False, principals=("User:alice",)),
        Broker("broker-2", json_format=True, principals=("User:bob", "User:carol")),
    ]
    logs = write_logs(tmp_path / "logs", brokers, lines=3000, seed=11)
    (logs / "broker-9.log").write_text("\n".join(ODD_LINES + BROKER_LINES) + "\n")
    report = ingest(spark, logs, tmp_path / "events")

    expected_events: list[Row] = []
    expected_rest: list[dict[str, Any]] = []
    for path in sorted(logs.iterdir()):
        lines = spark_lines(path.read_bytes())
        events, _ = reference(lines, gateway_of(path.as_uri()), UTC)
        expected_events += events
        rows = [parse_line(line, gateway_of(path.as_uri())) for line in lines]
        expected_rest += [
            {k: r[k] for k in ("status", "reason", "line")} for r in rows if r["status"] != "ok"
        ]
    written = ds.dataset(tmp_path / "events", format="parquet", partitioning="hive")
    table = written.to_table(columns=list(USAGE_SCHEMA.names))
    assert ordered(table.to_pylist()) == sorted(expected_events, key=repr)
    assert table.schema == USAGE_SCHEMA

    # The samples as the ingest that parsed in the JVM picked them from the same lines.
    rest = spark.createDataFrame(
        pa.Table.from_pylist(expected_rest, schema=REST_SCHEMA).to_pandas()
    )
    sampled = rest.agg(*_bucket_metrics()).collect()[0].asDict()
    assert report["events"] == len(expected_events)
    assert report["failed"] == sum(r["status"] == "error" for r in expected_rest)
    assert report["other"] == sum(r["status"] == "other" for r in expected_rest)
    assert report["failed_samples"] == _samples(sampled, "error")
    assert report["other_samples"] == _samples(sampled, "other")
    assert report["failed_samples"] and report["other_samples"]


@pytest.mark.spark
def test_ingest_of_one_small_file_leaves_a_task_idle(spark: SparkSession, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "only.log").write_text(_json_line(_json()) + "\n")
    assert spark.sparkContext.defaultParallelism > 1
    report = ingest(spark, logs, tmp_path / "events")
    assert (report["lines"], report["events"], report["failed"], report["other"]) == (1, 1, 0, 0)
    files = list((tmp_path / "events").rglob("*.parquet"))
    assert [f.parent.name for f in files] == ["hour=09"]


def test_a_retried_or_abandoned_task_attempt_leaves_one_copy_of_its_events(
    tmp_path: Path,
) -> None:
    log, lost = tmp_path / "broker-1.log", tmp_path / "broker-2.log"
    log.write_text("\n".join([*(_json_line(_json()) for _ in range(5)), "other"]) + "\n")
    lost.write_text(_json_line(_json()) + "\n")
    # An attempt that wrote its first file's events and then failed on its second.
    failing = IngestJob(deal_pieces([log, lost], 1), str(tmp_path / "events"), UTC)
    lost.unlink()
    with pytest.raises(FileNotFoundError):
        list(run_task(failing, 0))
    assert not list((tmp_path / "events").rglob("*.parquet"))
    assert not list((tmp_path / "events").rglob(".*"))
    job = IngestJob(deal_pieces([log], 1), str(tmp_path / "events"), UTC)
    for _ in range(2):  # the retry, and a speculative attempt finishing after it
        list(run_task(job, 0))
    files = list((tmp_path / "events").rglob("*.parquet"))
    assert [f.name for f in files] == ["part-00000.parquet"]
    assert ds.dataset(tmp_path / "events", partitioning="hive").count_rows() == 5
    assert not list((tmp_path / "events").rglob(".*"))
