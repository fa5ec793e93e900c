"""A gateway with the quota stages (issue 4) in front of the shared tansu broker, fresh per
test so every test starts from full token buckets, plus a stage that records what the
gateway read and answered."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.stages.exchange import Exchange
from quotagate.gateway.stages.stage import Stage

SUPER_USER = "User:ANONYMOUS"  # PLAINTEXT connections authenticate as ANONYMOUS


@dataclasses.dataclass(frozen=True, slots=True)
class Seen:
    connection_id: int
    api_key: int
    read_ms: float
    """Monotonic ms when the gateway read the request."""
    answered_ms: float
    """Monotonic ms when the response left the stage chain."""
    mute_ms: int
    """How long the gateway then stopped reading this connection (KIP-219)."""


class RecorderStage(Stage):
    """Sees every request first and every response last (after the quota stages decided the
    throttle), on the gateway's loop; the test reads ``seen`` once the client is done."""

    name: ClassVar[str] = "test-recorder"
    request_keys: ClassVar[frozenset[int] | None] = None
    response_keys: ClassVar[frozenset[int] | None] = None

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def on_response(self, exchange: Exchange) -> None:
        self.seen.append(
            Seen(
                exchange.connection.connection_id,
                exchange.api_key,
                exchange.received_ns / 1e6,
                time.monotonic_ns() / 1e6,
                exchange.mute_ms,
            )
        )


@dataclasses.dataclass
class QuotaGateway:
    background: BackgroundGateway
    runtime: QuotaRuntime
    recorder: RecorderStage

    @property
    def bootstrap(self) -> str:
        return str(self.background.bootstrap)


@pytest.fixture
def quota_gateway(
    start_gateway: Callable[..., BackgroundGateway], tansu: TansuBroker
) -> Callable[..., QuotaGateway]:
    """``quota_gateway(super_users=..., **quota_settings)`` → a new gateway with quotas."""

    def start(
        super_users: frozenset[str] = frozenset({SUPER_USER}), **settings: Any
    ) -> QuotaGateway:
        runtime = QuotaRuntime(QuotaSettings(super_users=super_users, **settings))
        recorder = RecorderStage()
        background = start_gateway(
            tansu.bootstrap, stages=[recorder], plugins=[QuotaEnforcement(runtime)]
        )
        return QuotaGateway(background, runtime, recorder)

    return start
