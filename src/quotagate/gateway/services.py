"""What every client connection of one gateway shares."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Protocol

from quotagate.gateway.auth.authenticator import AuthenticatorFactory
from quotagate.gateway.config import GatewayConfig
from quotagate.gateway.limits.connections import ConnectionLimits
from quotagate.gateway.limits.memory_pool import MemoryPool
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.gateway.refusals import RefusalLog
from quotagate.gateway.stages.chain import StageChain
from quotagate.gateway.upstream.brokers import BrokerDirectory
from quotagate.gateway.upstream.link import UpstreamHealth


class ConnectionHandle(Protocol):
    """What the gateway's sweeps and shutdown do with a client connection."""

    @property
    def closed(self) -> bool: ...

    def begin_drain(self) -> None: ...

    def close(self, reason: str, level: int = logging.INFO) -> None: ...

    def expire(self, now: float, idle_s: float, frame_s: float) -> None: ...


@dataclass(slots=True)
class GatewayServices:
    config: GatewayConfig
    chain: StageChain
    metrics: GatewayMetrics
    health: UpstreamHealth
    brokers: BrokerDirectory
    authenticator_factory: AuthenticatorFactory | None
    limits: ConnectionLimits
    refusals: RefusalLog
    """Where refused clients are counted and (rate-limited) logged."""
    memory_pool: MemoryPool = field(default_factory=MemoryPool)
    """Request bytes held by all connections: ``queued.max.request.bytes``."""
    connections: set[ConnectionHandle] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_connection_id(self) -> int:
        return next(self._ids)
