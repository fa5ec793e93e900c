"""The supervisor of an instance: starts its workers, restarts the ones that die, stops all.

Workers are separate processes (``spawn``: a fresh interpreter, nothing inherited but the
config) that all bind every port with SO_REUSEPORT. A worker that exits while the instance is
running is restarted after a backoff that doubles with each quick failure (0.5 s up to 30 s,
back to 0.5 s once a worker has stayed up for a minute). SIGTERM or SIGINT stops the workers
with SIGTERM (each drains as a single gateway does) and SIGKILLs any still running after
``shutdown.timeout.ms`` plus a grace period.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from types import FrameType
from typing import Any, Final

from quotagate.fleet.local_hub import HUB_ENV, LocalHub
from quotagate.gateway import LOOPBACK, GatewayConfig, free_port
from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort

log = logging.getLogger(__name__)

WorkerTarget = Callable[[GatewayConfig, int, "Queue[int]"], None]
"""Run worker ``index`` until SIGTERM; put ``index`` on the queue once it serves."""

RESTART_BACKOFF_S: Final = 0.5
RESTART_BACKOFF_MAX_S: Final = 30.0
HEALTHY_AFTER_S: Final = 60.0
START_TIMEOUT_S: Final = 120.0
STOP_GRACE_S: Final = 10.0


@dataclass
class _Slot:
    index: int
    metrics_port: int
    process: BaseProcess | None = None
    started_at: float = 0.0
    backoff_s: float = RESTART_BACKOFF_S
    restart_at: float | None = None


class StartError(RuntimeError):
    """A worker exited before it served."""


class Supervisor:
    def __init__(self, config: GatewayConfig, target: WorkerTarget) -> None:
        self.config = config
        self._target = target
        self._context = multiprocessing.get_context("spawn")
        self._ready: Queue[int] = self._context.Queue()
        self._slots = [_Slot(i, free_port()) for i in range(config.workers)]
        self._stop = threading.Event()
        self.restarts = 0
        # Workers of one instance hear each other through it at once (fleet/local_hub).
        self.hub = LocalHub() if config.workers > 1 else None

    # -- what the instance's metrics endpoint reads ----------------------------------------

    def metrics_endpoints(self) -> dict[int, str]:
        return {
            slot.index: f"http://{LOOPBACK}:{slot.metrics_port}/metrics"
            for slot in self._slots
            if slot.process is not None and slot.process.is_alive()
        }

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker and wait until each serves (or one fails)."""
        if self.hub is not None:
            self.hub.start()
            os.environ[HUB_ENV] = str(self.hub.path)  # spawned workers inherit it
        for slot in self._slots:
            self._spawn(slot)
        waiting = {slot.index for slot in self._slots}
        deadline = time.monotonic() + START_TIMEOUT_S
        while waiting:
            dead = [s for s in self._slots if s.process is not None and not s.process.is_alive()]
            if dead:
                self.stop()
                code = dead[0].process.exitcode if dead[0].process else None
                raise StartError(f"worker {dead[0].index} exited with code {code} at start")
            if time.monotonic() > deadline:
                self.stop()
                raise StartError(f"workers {sorted(waiting)} did not start in time")
            try:
                waiting.discard(self._ready.get(timeout=0.2))
            except Exception:  # queue.Empty, from a multiprocessing queue
                continue

    def run(self) -> None:
        """Keep the workers running until :meth:`request_stop` (or a signal), then stop."""
        while not self._stop.is_set():
            sentinels = [s.process.sentinel for s in self._slots if s.process is not None]
            wait(sentinels, timeout=0.2)
            self._drain_ready()
            now = time.monotonic()
            for slot in self._slots:
                self._look_after(slot, now)
        self.stop()

    def request_stop(self, *_: Any) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            log.info(kv("instance_stopping", signal=signal.Signals(signum).name))
            self.request_stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def stop(self) -> None:
        self._stop.set()
        live = [s.process for s in self._slots if s.process is not None and s.process.is_alive()]
        for process in live:
            _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + self.config.shutdown_timeout_ms / 1000 + STOP_GRACE_S
        for process in live:
            process.join(max(deadline - time.monotonic(), 0.1))
            if process.is_alive():
                log.warning(kv("worker_killed", pid=process.pid, reason="shutdown timeout"))
                process.kill()
                process.join(5)
        if self.hub is not None:
            self.hub.stop()

    # -- internals ---------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        config = dataclasses.replace(
            self.config, metrics_listen=HostPort(LOOPBACK, slot.metrics_port)
        )
        process = self._context.Process(
            target=self._target,
            args=(config, slot.index, self._ready),
            name=f"quotagate-worker-{slot.index}",
            daemon=False,
        )
        process.start()
        slot.process, slot.started_at, slot.restart_at = process, time.monotonic(), None
        log.info(kv("worker_started", worker=slot.index, pid=process.pid))

    def _look_after(self, slot: _Slot, now: float) -> None:
        process = slot.process
        if process is not None and not process.is_alive():
            process.join(0)
            lived = now - slot.started_at
            if lived >= HEALTHY_AFTER_S:
                slot.backoff_s = RESTART_BACKOFF_S
            slot.restart_at = now + slot.backoff_s
            log.warning(
                kv(
                    "worker_exited",
                    worker=slot.index,
                    pid=process.pid,
                    code=process.exitcode,
                    lived_s=round(lived, 1),
                    restart_in_s=slot.backoff_s,
                )
            )
            slot.backoff_s = min(slot.backoff_s * 2, RESTART_BACKOFF_MAX_S)
            slot.process = None
        if slot.process is None and slot.restart_at is not None and now >= slot.restart_at:
            self.restarts += 1
            self._spawn(slot)

    def _drain_ready(self) -> None:
        while True:
            try:
                index = self._ready.get_nowait()
            except Exception:  # queue.Empty
                return
            log.info(kv("worker_serving", worker=index))


def _signal(process: BaseProcess, signum: int) -> None:
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)
