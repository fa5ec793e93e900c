"""Where upstream brokers are, as learned from the responses that name them."""

from __future__ import annotations

from quotagate.protocol.host_port import HostPort


class BrokerDirectory:
    """Upstream node id → the address the upstream advertises for it."""

    def __init__(self) -> None:
        self._nodes: dict[int, HostPort] = {}

    def learn(self, node_id: int, host: str, port: int) -> bool:
        """Record a node's address; True when it is new or moved."""
        address = HostPort(host, port)
        if self._nodes.get(node_id) == address:
            return False
        self._nodes[node_id] = address
        return True

    def address(self, node_id: int) -> HostPort | None:
        return self._nodes.get(node_id)

    def nodes(self) -> dict[int, HostPort]:
        return dict(self._nodes)
