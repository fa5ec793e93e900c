"""Run a gateway on its own uvloop event loop in a background thread (tests, embedding)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future

import uvloop

from quotagate.gateway.auth.authenticator import AuthenticatorFactory
from quotagate.gateway.config import GatewayConfig
from quotagate.gateway.lifecycle import Lifecycle
from quotagate.gateway.server import Gateway
from quotagate.gateway.stages.plugin import Plugin
from quotagate.gateway.stages.stage import Stage
from quotagate.protocol.host_port import HostPort


class BackgroundGateway(Lifecycle):
    def __init__(
        self,
        config: GatewayConfig,
        stages: Sequence[Stage] = (),
        authenticator_factory: AuthenticatorFactory | None = None,
        plugins: Sequence[Plugin] = (),
    ) -> None:
        self._config = config
        self._stages = stages
        self._plugins = plugins
        self._authenticator_factory = authenticator_factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._gateway: Gateway | None = None

    @property
    def gateway(self) -> Gateway:
        assert self._gateway is not None, "not started"
        return self._gateway

    @property
    def bootstrap(self) -> HostPort:
        """The first listener's bootstrap address."""
        return next(iter(self.gateway.bootstrap.values()))

    def start(self, timeout_s: float = 30.0) -> None:
        started: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(started,), name="quotagate-gateway", daemon=True
        )
        self._thread.start()
        started.result(timeout_s)

    def _run(self, started: Future[None]) -> None:
        loop = uvloop.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(started))
        finally:
            try:
                _cancel_the_rest(loop)
            finally:
                loop.close()

    async def _main(self, started: Future[None]) -> None:
        self._stop = asyncio.Event()
        try:
            self._gateway = Gateway(
                self._config, self._stages, self._authenticator_factory, plugins=self._plugins
            )
            await self._gateway.start()
        except BaseException as exc:
            started.set_exception(exc)
            return
        started.set_result(None)
        await self._stop.wait()
        await self._gateway.shutdown()

    def call(self, fn: object) -> None:
        """Run ``fn()`` on the gateway's loop (fire and forget)."""
        assert self._loop is not None and callable(fn)
        self._loop.call_soon_threadsafe(fn)

    def stop(self, timeout_s: float = 60.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout_s)
        self._thread = None


def _cancel_the_rest(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and await what the gateway left running (an upstream connection still being
    opened, a failed start's discovery), as ``asyncio.run`` does: a task left pending when the
    loop closes is finalised later, outside any loop, and fails there."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
