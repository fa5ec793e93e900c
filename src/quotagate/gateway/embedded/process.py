"""A child process serving on a loopback port (tansu, and haproxy in the tests): wait until it
accepts connections, and stop it."""

from __future__ import annotations

import socket
import subprocess
import time


def wait_until_accepting(
    process: subprocess.Popen[bytes], host: str, port: int, timeout_s: float
) -> bool:
    """True once ``host:port`` accepts a connection; False when ``process`` exits first or
    ``timeout_s`` passes (``process.poll()`` tells which)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def terminate(process: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL when it has not exited in ``timeout_s``; nothing if not running."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
