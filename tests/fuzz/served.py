"""A ``quotagate serve`` process with the quota stages, as operators run it, for the fuzz tests.

A subprocess rather than a gateway thread: if a hostile frame aborts the gateway (kio's
native reader asking for 137 GB), the test sees a dead process and its log instead of losing
the pytest process with it, and the gateway's RSS is its own (``/proc/<pid>/status``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Final

from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.store.quotas import Change, QuotaStore

TANSU_NODE_ID: Final = 111
# High enough that the live clients are not throttled, present so that every quota stage
# decodes what it meters: CreateTopics/DeleteTopics/CreatePartitions, Produce and Fetch.
DEFAULT_CLIENT_QUOTAS: Final = {
    "controller_mutation_rate": 1000.0,
    "producer_byte_rate": 1e9,
    "consumer_byte_rate": 1e9,
    "request_percentage": 10000.0,
}
TRACEBACK_MARKERS: Final = ("Traceback", "stage_failed")


class ServedGateway:
    def __init__(self, workdir: Path, upstream: str) -> None:
        self.workdir = workdir
        self.upstream = upstream
        self.port = free_port()
        self.metrics_port = free_port()
        self.log_path = workdir / "quotagate.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return LOOPBACK, self.port

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self, timeout_s: float = 60.0) -> None:
        store = self.workdir / "quotagate.db"
        _seed_quotas(store)
        config = self.workdir / "quotagate.toml"
        config.write_text(self._config(store), encoding="utf-8")
        executable = Path(sys.executable).parent / "quotagate"
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                [str(executable), "serve", "--config", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + timeout_s
        while "bootstrap.servers=" not in self.log():
            if not self.alive() or time.monotonic() > deadline:
                raise AssertionError(f"quotagate serve did not start:\n{self.log()}")
            time.sleep(0.05)

    def _config(self, store: Path) -> str:
        return f"""
[upstream]
bootstrap.servers = "{self.upstream}"

[[listeners]]
name = "PLAINTEXT"
listen = "{LOOPBACK}:{self.port}"
advertised.host = "{LOOPBACK}"
broker.port.start = {free_port()}
broker.node.id.start = {TANSU_NODE_ID}
broker.port.count = 1

[quotas]
"controller.quota.window.num" = 11
"controller.quota.window.size.seconds" = 1
"super.users" = ["User:ANONYMOUS"]

[store]
path = "{store}"

[metrics]
listen = "{LOOPBACK}:{self.metrics_port}"

[log]
level = "INFO"
"""

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def log_since(self, offset: int) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", errors="replace")

    def rss_kib(self) -> int:
        """Resident set size of the gateway process (VmRSS), in KiB."""
        status = Path(f"/proc/{self.pid}/status").read_text(encoding="ascii")
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1])

    def metric(self, name: str) -> float:
        """The value of an unlabelled metric on the gateway's Prometheus endpoint."""
        url = f"http://{LOOPBACK}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def tracebacks(self) -> list[str]:
        return [
            line for line in self.log().splitlines() if any(m in line for m in TRACEBACK_MARKERS)
        ]

    def stop(self, timeout_s: float = 30.0) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode


def _seed_quotas(path: Path) -> None:
    store = QuotaStore.open(path)
    try:
        store.alter_client_quotas(
            [
                Change({"client-id": None}, key, value)
                for key, value in DEFAULT_CLIENT_QUOTAS.items()
            ],
            principal="User:fuzz-test",
            source="test",
        )
    finally:
        store.close()
