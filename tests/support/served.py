"""``quotagate serve`` as a person runs it, in a child process whose merged output a thread
collects (so a test can wait for a line and still read everything after it stopped)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

QUOTAGATE = Path(sys.executable).parent / "quotagate"


class Served:
    """``quotagate serve --config CONFIG``; ``env``: added to this process's environment."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [str(QUOTAGATE), "serve", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        """SIGTERM, as a service manager stops it; SIGKILL after a minute."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(10)
