"""A worker's link to its instance's hub (local_hub): send reports, receive the others'.

The link is a fast path beside the upstream, never instead of it: while it is down (the
hub not up yet, a supervisor restarting) the worker hears its local peers through the
upstream as a single-process instance does, and it reconnects every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from quotagate.fleet.local_hub import HEADER, FrameError, frame, read_frame
from quotagate.logs import kv

log = logging.getLogger(__name__)

_RECONNECT_S: Final = 1.0
_MAX_PENDING: Final = 4 * 1024 * 1024


class HubLink:
    def __init__(self, path: str, on_report: Callable[[bytes], None]) -> None:
        self.path = path
        self._on_report = on_report
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        self.received = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def send(self, report: bytes) -> None:
        writer = self._writer
        if writer is None or writer.transport.get_write_buffer_size() > _MAX_PENDING:
            return
        writer.write(frame(report))
        self.sent += 1

    async def _run(self) -> None:
        logged_down = False
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(self.path)
            except OSError as exc:
                if not logged_down:
                    log.warning(kv("fleet_hub_unreachable", path=self.path, error=exc))
                    logged_down = True
                await asyncio.sleep(_RECONNECT_S)
                continue
            self._writer, logged_down = writer, False
            log.info(kv("fleet_hub_joined", path=self.path))
            try:
                while (data := await read_frame(reader)) is not None:
                    self.received += 1
                    self._on_report(data[HEADER.size :])
            except (FrameError, OSError) as exc:
                log.warning(kv("fleet_hub_link_lost", error=exc))
            finally:
                self._writer = None
                writer.close()
            await asyncio.sleep(_RECONNECT_S)
