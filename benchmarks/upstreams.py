"""The upstream a benchmark runs against: ``--upstream tansu`` (the embedded broker) or
``--upstream kafka`` (one Apache Kafka 4 broker in KRaft mode, from the jars ``make jars``
fetched; tests/support/kafka_cluster.py). One broker either way, so the same single-partition
workload reads the same on both."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from quotagate.gateway.embedded import TansuBroker
from support.gateways import TANSU_NODE_ID
from support.kafka_cluster import kafka_cluster

KINDS = ("tansu", "kafka")


@dataclass(frozen=True)
class Broker:
    kind: str
    bootstrap: str
    node_ids: tuple[int, ...]


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--upstream", choices=KINDS, default="tansu", help="the broker behind every side"
    )


@contextmanager
def started(kind: str) -> Iterator[Broker]:
    if kind == "kafka":
        with (
            tempfile.TemporaryDirectory() as tmp,
            kafka_cluster(Path(tmp), nodes=1, request_log=False) as cluster,
        ):
            yield Broker(kind, cluster.bootstrap(), tuple(cluster.nodes))
    else:
        with TansuBroker() as broker:
            yield Broker(kind, broker.bootstrap, (TANSU_NODE_ID,))
