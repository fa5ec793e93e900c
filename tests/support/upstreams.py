"""The two upstreams the suites run against: a tansu broker and the Apache Kafka cluster.

A test that takes the ``upstream`` fixture runs once in front of each (``tansu``, ``kafka``);
what it needs to know of either is here: the PLAINTEXT bootstrap, the broker node ids (the
gateway serves one port per node) and what the upstream can do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

NAMES: Final = ("tansu", "kafka")


@dataclass(frozen=True)
class Upstream:
    name: str
    bootstrap: str
    """PLAINTEXT HOST:PORT list, as ``[upstream] bootstrap.servers`` takes it."""
    node_ids: tuple[int, ...]

    @property
    def is_kafka(self) -> bool:
        return self.name == "kafka"

    @property
    def replication(self) -> int:
        """A replication factor for a test's topic: every broker holds a copy."""
        return len(self.node_ids)
