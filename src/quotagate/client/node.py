"""What the client keeps per broker node: address, connection, reconnect and throttle state."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from quotagate.client.backoff_policy import ReconnectState, SetupTimeoutState
from quotagate.client.connection import BrokerConnection
from quotagate.client.throttle import NodeThrottle
from quotagate.protocol.api_support import VersionRange
from quotagate.protocol.host_port import HostPort


@dataclass(frozen=True, slots=True)
class Node:
    """A broker; bootstrap servers get negative ids until metadata names the real ones."""

    node_id: int
    address: HostPort


class NodeState:
    __slots__ = (
        "api_versions",
        "connection",
        "last_error",
        "lock",
        "node",
        "reconnect",
        "setup",
        "throttle",
    )

    def __init__(self, node: Node, reconnect: ReconnectState, setup: SetupTimeoutState) -> None:
        self.node = node
        self.reconnect = reconnect
        self.setup = setup
        self.throttle = NodeThrottle()
        self.connection: BrokerConnection | None = None
        self.api_versions: dict[int, VersionRange] = {}
        self.last_error: str | None = None  # why the last connect failed, for messages
        self.lock = asyncio.Lock()  # one connect at a time per node

    @property
    def connected(self) -> bool:
        return self.connection is not None and not self.connection.closed

    @property
    def in_flight(self) -> int:
        return self.connection.in_flight if self.connection is not None else 0
