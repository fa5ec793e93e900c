"""The instance's hub: the workers of one instance hear each other's reports at once.

Through the upstream, a peer's usage reaches a worker one exchange interval plus the
publish-to-read-back delay after it happened, and that lag is what lets one client over
many connections through a fleet at more than one process would admit (docs/fleet.md,
"Expected overshoot"). The workers of one instance are on one host, so the supervisor
relays their reports over a Unix socket as they are made, every
``exchange.local.interval.ms``; the upstream still carries every worker's report, for the
other instances and as the check that the fleet can hear itself. A report that arrives by
both ways counts once (the ledger absorbs a sender's reports in ``seq`` order only).

The hub only relays: a frame is a 4-byte big-endian length and the report's bytes, passed
to every other connected worker unread. A declared length above ``MAX_FRAME`` closes that
worker's link (it reconnects); a worker that does not read its frames loses them rather than
letting the hub buffer without bound (reports carry cumulative counts: nothing is lost for
good, only late).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import struct
import tempfile
import threading
from pathlib import Path
from typing import Final

from quotagate.logs import kv

log = logging.getLogger(__name__)

HUB_ENV: Final = "QUOTAGATE_FLEET_HUB"
"""Set by the supervisor for its workers: the path of the hub's socket."""
MAX_FRAME: Final = 16 * 1024 * 1024
MAX_BUFFERED: Final = 32 * 1024 * 1024
"""Bytes waiting for one slow worker beyond which frames to it are dropped."""
HEADER: Final = struct.Struct(">I")


class LocalHub:
    """Runs in the supervisor, on its own thread and event loop."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="quotagate-hub-"))
        self.path = self._dir / "hub.sock"
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._run, name="fleet-hub", daemon=True)
        self._started = threading.Event()
        self.relayed = 0
        self.dropped = 0

    def start(self) -> None:
        os.chmod(self._dir, 0o700)  # only this user's workers may join the instance
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the fleet hub did not start")

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_unix_server(self._serve, path=str(self.path))
        )
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for writer in list(self._links):
                writer.close()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._links.add(writer)
        try:
            while True:
                frame = await read_frame(reader)
                if frame is None:
                    return
                self._relay(frame, writer)
        except FrameError as exc:
            log.warning(kv("fleet_hub_link_closed", reason=str(exc)))
        finally:
            self._links.discard(writer)
            writer.close()

    def _relay(self, frame: bytes, sender: asyncio.StreamWriter) -> None:
        for link in self._links:
            if link is sender:
                continue
            if link.transport.get_write_buffer_size() > MAX_BUFFERED:
                self.dropped += 1
                continue
            link.write(frame)
            self.relayed += 1


class FrameError(ValueError):
    """Bytes on a hub link that are not a frame."""


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next whole frame (header included, as it is relayed), None at a clean end."""
    with contextlib.suppress(asyncio.IncompleteReadError):
        header = await reader.readexactly(HEADER.size)
        (size,) = HEADER.unpack(header)
        if size > MAX_FRAME:
            raise FrameError(f"declared frame of {size} bytes, more than {MAX_FRAME}")
        # readexactly gathers what arrives: it never allocates the declared size up front.
        return header + await reader.readexactly(size)
    return None
