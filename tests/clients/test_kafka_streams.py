"""A Kafka Streams application (4.3.1) through the gateway: a word count with
``processing.guarantee=exactly_once_v2`` (tests/clients/java/JavaStreams.java), so its
transactions (InitProducerId, AddPartitionsToTxn, TxnOffsetCommit, EndTxn, FindCoordinator
for the transaction coordinator) pass the gateway, under a produce quota on its producer's
client id. Read back with ``isolation.level=read_committed``, every word's count is exact, and
the quota held the application's producer.

In front of Kafka only: tansu has no transaction coordinator a Streams application can use
(README's client table).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotagate.store.quotas import Change
from support.gateways import LiveGateway, gateway_config, quota_gateway
from support.java import run_driver
from support.kafka_cluster import KafkaCluster
from support.upstreams import Upstream

pytestmark = pytest.mark.integration

CLIENT_ID = "wordcount"
PRODUCER = f"{CLIENT_ID}-StreamThread-1-producer"
"""The client id Streams gives its thread's (transactional) producer."""
QUOTA = 20_000
"""producer_byte_rate of that producer, bytes/s: well under what it sends unthrottled."""
LINES = 1000


@pytest.fixture(scope="module")
def streams_gateway(
    kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveGateway]:
    upstream = Upstream("kafka", kafka.bootstrap(), tuple(kafka.nodes))
    config = gateway_config(
        upstream,
        store_path=str(tmp_path_factory.mktemp("streams") / "quotagate.db"),
        extra={"quotas": {"quota.window.num": 2, "quota.window.size.seconds": 1}},
    )
    with quota_gateway(
        config, [Change({"client-id": PRODUCER}, "producer_byte_rate", float(QUOTA))]
    ) as live:
        yield live


def test_word_count_exactly_once_under_a_quota(
    streams_gateway: LiveGateway, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:6]
    result = run_driver(
        "kafka",
        "JavaStreams",
        "wordcount",
        streams_gateway.bootstrap,
        f"words-{run}",
        f"counts-{run}",
        "3",
        "3",
        f"wordcount-{run}",
        CLIENT_ID,
        str(LINES),
        str(tmp_path / "state"),
        timeout_s=240,
    )
    throttled_ms = streams_gateway.series("produce_throttle_time_ms", PRODUCER)
    print(
        f"Streams word count: state {result['state']}, exact={result['exact']} after "
        f"{result['seconds']:.1f} s; its producer sent {result['producerBytes']} bytes, told to "
        f"wait up to {result['produceThrottleTimeMax']} ms; the gateway throttled it "
        f"{throttled_ms:.0f} ms"
    )
    assert result["state"] == "RUNNING", "\n".join(result["output"][:5])
    assert result["exact"] and result["words"] == 6 and result["inputWords"] == 4 * LINES
    # The quota bit, and held: the producer never ran faster than its quota over the run.
    assert result["produceThrottleTimeMax"] > 0 and throttled_ms > 0
    # The throttle the producer was last told is debt the run's end never waits out (a
    # fresh-clone run measured 1.075 x over 12.6 s without it): held over the run and that.
    owed_s = result["produceThrottleTimeMax"] / 1000
    assert result["producerBytes"] / (result["seconds"] + owed_s) <= 1.05 * QUOTA
