"""Request-log lines of both formats, parsed without Spark."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from pathlib import Path

import pytest

from quotagate.pipeline.ingest.job import parse_line
from quotagate.pipeline.ingest.log4j import LineError, client_host, parse_log4j_time
from quotagate.pipeline.ingest.reference import FORWARDED

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"


def _lines(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def test_text_format_produce_at_trace_level_gives_bytes_per_topic() -> None:
    row = parse_line(_lines("broker-1-kafka-2.7.log")[0], "broker-1")
    assert row["status"] == "ok"
    # logged at 10:15:32.123 UTC after totalTime 4.118 ms: read at .119
    assert row["ts_ms"] == 1614852932123 - 4
    assert (row["principal"], row["client_id"], row["listener"]) == (
        "User:alice",
        "producer-1",
        "SASL_SSL",
    )
    assert (row["api_key"], row["api_version"]) == (0, 8)
    assert row["topics"] == [
        {"topic": "orders", "bytes": 2144},
        {"topic": "audit-log", "bytes": 300},
    ]
    assert row["request_bytes"] == 2444
    assert row["client_host"] == "10.1.2.3:53116"
    assert row["gateway_time_us"] == 1637
    assert row["upstream_time_us"] == 0


def test_text_format_debug_produce_keeps_throttle_but_has_no_sizes() -> None:
    row = parse_line(_lines("broker-1-kafka-2.7.log")[1], "b")
    assert row["throttle_ms"] == 212
    assert row["request_bytes"] == 0
    assert row["topics"] == []


def test_text_format_fetch_sums_record_sets_and_keeps_a_dn_principal() -> None:
    row = parse_line(_lines("broker-1-kafka-2.7.log")[2], "b")
    assert row["api_key"] == 1
    assert row["response_bytes"] == 40960 + 2048
    assert row["principal"] == "User:CN=analytics,OU=data,O=corp"
    assert row["listener"] == "SSL"


def test_text_format_mutations_count_only_successful_topics() -> None:
    lines = _lines("broker-1-kafka-2.7.log")
    created = parse_line(lines[4], "b")
    assert (created["api_key"], created["partition_mutations"]) == (19, 6)
    deleted = parse_line(lines[6], "b")
    assert (deleted["api_key"], deleted["partition_mutations"]) == (20, 1)


def test_json_format_produce_fetch_and_admin() -> None:
    lines = _lines("broker-2-kafka-3.7.log")
    produce = parse_line(lines[0], "broker-2")
    assert produce["topics"] == [
        {"topic": "orders", "bytes": 3072},
        {"topic": "payments", "bytes": 512},
    ]
    assert produce["request_bytes"] == 3584
    assert produce["ts_ms"] == 1714986001002 - 3
    fetch = parse_line(lines[1], "broker-2")
    assert (fetch["response_bytes"], fetch["throttle_ms"]) == (16384, 150)
    assert fetch["client_id"] == "rdkafka"
    created = parse_line(lines[2], "broker-2")
    # clicks: broker default resolved to 3 in the response; views: 8; dup failed.
    assert created["partition_mutations"] == 11
    assert parse_line(lines[3], "broker-2")["partition_mutations"] == 2
    assert parse_line(lines[4], "broker-2")["api_key"] == 18


@pytest.mark.parametrize(
    ("name", "index", "status", "reason"),
    [
        ("broker-1-kafka-2.7.log", 5, "other", "not a 'Completed request' line"),
        ("broker-1-kafka-2.7.log", 7, "error", "no 'RequestHeader"),
        ("broker-1-kafka-2.7.log", 8, "other", "not a 'Completed request' line"),
        ("broker-1-kafka-2.7.log", 9, "error", "unknown apiKey NOT_AN_API"),
        ("broker-2-kafka-3.7.log", 5, "error", "invalid JSON"),
        ("broker-2-kafka-3.7.log", 6, "error", "requestHeader has no requestApiKey"),
    ],
)
def test_bad_lines_are_classified_with_a_reason(
    name: str, index: int, status: str, reason: str
) -> None:
    row = parse_line(_lines(name)[index], "b")
    assert row["status"] == status
    assert row["reason"].startswith(reason)
    assert row["line"] == _lines(name)[index]


def test_log4j_time_honours_the_offset() -> None:
    utc = parse_log4j_time("2024-05-06 09:00:01,002", UTC)
    cest = parse_log4j_time("2024-05-06 11:00:01,002", timezone(timedelta(hours=2)))
    assert utc == cest == 1714986001002
    with pytest.raises(LineError):
        parse_log4j_time("2024-13-06 09:00:01,002", UTC)


def test_client_host_is_the_peer_of_the_connection_id() -> None:
    assert client_host("10.0.0.5:9092-10.1.2.3:53116-12") == "10.1.2.3:53116"


def test_kafka_4_3_lines_as_kafka_wrote_them() -> None:
    """Lines of the test cluster's request.log (Kafka 4.3.1, KIP-673 JSON: Kafka 4 writes no
    text form), with fields no earlier fixture had (isForwarded, requestApiKeyName,
    clientInformation, raft and broker-to-controller requests)."""
    lines = (LOGS.parent / "kafka-4.3" / "request.log").read_text().splitlines()
    rows = [parse_line(line, "node-1") for line in lines]
    assert [r["status"] for r in rows].count("ok") == 11
    produce, fetch, follower, raft, created = rows[:5]
    assert (produce["client_id"], produce["api_version"]) == ("reqlog-producer-a", 10)
    assert produce["topics"] == [{"topic": "reqlog-010d9bc0", "bytes": 666327}]
    assert (fetch["response_bytes"], fetch["follower"]) == (2007186, False)
    assert (follower["client_id"], follower["follower"]) == ("broker-2-fetcher-0", True)
    assert (raft["listener"], raft["follower"]) == ("CONTROLLER", True)
    assert (created["client_id"], created["partition_mutations"]) == ("rdkafka", 3)
    # The same CreateTopics as the controller logged it, forwarded by the broker; and one
    # a broker sent for a producer's Metadata (auto-creation): not requests of the client.
    for forwarded in (rows[5], rows[6], rows[12]):
        assert (forwarded["status"], forwarded["reason"]) == ("other", FORWARDED)
    assert [r["api_key"] for r in rows[7:12]] == [3, 18, 10, 63, 52]
