"""What every client connection of one gateway shares."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quotagate.gateway.auth import AuthenticatorFactory
from quotagate.gateway.brokers import BrokerDirectory
from quotagate.gateway.chain import StageChain
from quotagate.gateway.config import GatewayConfig
from quotagate.gateway.memory_pool import MemoryPool
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.gateway.upstream import UpstreamHealth

if TYPE_CHECKING:
    from quotagate.gateway.connection import ClientConnection


@dataclass(slots=True)
class GatewayServices:
    config: GatewayConfig
    chain: StageChain
    metrics: GatewayMetrics
    health: UpstreamHealth
    brokers: BrokerDirectory
    authenticator_factory: AuthenticatorFactory | None
    memory_pool: MemoryPool = field(default_factory=MemoryPool)
    """Request bytes held by all connections: ``queued.max.request.bytes``."""
    connections: set[ClientConnection] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_connection_id(self) -> int:
        return next(self._ids)
