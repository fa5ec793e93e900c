"""What the client knows of the cluster: bootstrap addresses, brokers and the controller."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from quotagate.client.node import Node
from quotagate.protocol.host_port import HostPort


class Cluster:
    def __init__(self, bootstrap: Sequence[HostPort]) -> None:
        # Negative ids, as Kafka gives bootstrap nodes, never collide with broker ids.
        self._bootstrap = [Node(-(index + 1), address) for index, address in enumerate(bootstrap)]
        self._brokers: dict[int, Node] = {}
        self._controller_id: int | None = None
        self.stale = True

    def nodes(self) -> list[Node]:
        """Known brokers, or the bootstrap servers before the first metadata."""
        return list(self._brokers.values()) or list(self._bootstrap)

    def controller(self) -> Node | None:
        """The node to send controller APIs to.

        KRaft brokers answer a random live broker as "controller" and forward to the real
        one; a response without a controller (-1, Metadata v0) leaves any broker, which
        forwards just the same.
        """
        if self._controller_id is not None and self._controller_id in self._brokers:
            return self._brokers[self._controller_id]
        brokers = sorted(self._brokers.values(), key=lambda node: node.node_id)
        return brokers[0] if brokers else None

    def update(self, response: Any) -> None:
        """Take brokers and controller from a Metadata response (any version)."""
        self._brokers = {
            int(broker.node_id): Node(int(broker.node_id), HostPort(broker.host, int(broker.port)))
            for broker in response.brokers
        }
        controller = getattr(response, "controller_id", None)
        self._controller_id = None if controller is None or int(controller) < 0 else int(controller)
        self.stale = False
