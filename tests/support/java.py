"""Java programs for the client matrix: the suite's drivers (tests/clients/java, compiled once by
tools/java_drivers.py) and Kafka's own command-line tools, each run as ``java -cp … MAIN …``
against a jar set of tools/jars.py (``kafka``: 4.3.1 with Streams and the tools; ``kafka-3.9``:
kafka-clients 3.9.1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import jars
import java_drivers

# Small heaps and a C1-only JIT: each program runs seconds, and the machine has two cores
# shared with three Kafka brokers and the gateway.
JVM_OPTIONS: Final = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:ActiveProcessorCount=2",
    "-Djava.awt.headless=true",
    # kafka-clients 3.9.1 logs through slf4j-simple (to stderr); 4.3.1's tools through log4j2,
    # whose default configuration prints errors only.
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)


class JavaFailedError(AssertionError):
    pass


def _java() -> str:
    found = shutil.which("java")
    assert found, "a Java runtime (17 or newer) is needed: `apt-get install openjdk-17-jdk`"
    return found


def classpath(jar_set: str, *, drivers: bool = False) -> str:
    entries = [jars.classpath(jar_set)]
    if drivers:
        entries.insert(0, str(java_drivers.compiled(jar_set)))
    return os.pathsep.join(entries)


def command(jar_set: str, main: str, *args: str, drivers: bool = False) -> list[str]:
    return [_java(), *JVM_OPTIONS, "-cp", classpath(jar_set, drivers=drivers), main, *args]


def run_driver(
    jar_set: str,
    main: str,
    *args: str,
    markers: dict[str, Callable[[], None]] | None = None,
    timeout_s: float = 180,
) -> dict[str, Any]:
    """Run a driver of tests/clients/java; the JSON object it prints last. A line of stdout
    named in ``markers`` calls its function when it is printed (the driver's phases)."""
    process = subprocess.Popen(
        command(jar_set, main, *args, drivers=True),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # stderr drained aside, so a chatty client never blocks on a full pipe.
    errors: list[str] = []
    drain = threading.Thread(target=lambda: errors.extend(process.stderr or ()), daemon=True)
    drain.start()
    timer = threading.Timer(timeout_s, process.kill)
    timer.start()
    lines: list[str] = []
    try:
        for raw in process.stdout or ():
            line = raw.strip()
            lines.append(line)
            if markers and line in markers:
                markers[line]()
        returncode = process.wait()
    finally:
        timer.cancel()
        drain.join(5)
    if returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise JavaFailedError(
            f"{main} {' '.join(args)} exited {returncode}:\n{''.join(errors)[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    # What else the program printed (log4j2's default configuration writes errors to stdout).
    result["output"] = [line for line in lines[:-1] if not markers or line not in markers]
    return result


def kafka_tool(main: str, *args: str, timeout_s: float = 120) -> str:
    """One of Kafka's own command-line tools (4.3.1), e.g. ``kafka.admin.ConfigCommand``; what
    it printed. It must succeed."""
    done = subprocess.run(
        command("kafka", main, *args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise JavaFailedError(
            f"{main} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def properties_file(directory: Path, name: str, values: dict[str, str]) -> Path:
    """A Java properties file (a tool's ``--command-config`` or ``--producer.config``)."""
    path = directory / name
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


class ReceiveQueues:
    """What waits, unread, in the gateway's sockets: the kernel's receive queue of every
    established loopback connection accepted on ``ports``, sampled from /proc/net/tcp every
    few milliseconds while running.

    The gateway stops reading a connection while it is muted (KIP-219), so a request a client
    sends during the mute sits there until the mute ends: a client that waits out
    ``throttle_time_ms`` itself leaves nothing queued; one that ignores it leaves its next
    request for the whole mute. An unmuted gateway reads a request within a millisecond or
    so, hence the hold time (:meth:`held_episodes`)."""

    INTERVAL_S: Final = 0.002

    def __init__(self, ports: Sequence[int]) -> None:
        self._ports = {f"{port:04X}" for port in ports}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self._open: dict[str, tuple[float, int]] = {}
        """Per connection (its remote address): since when bytes have waited, and the most."""
        self.episodes: list[tuple[float, int]] = []
        """(seconds, most bytes) of each closed stretch of bytes waiting on one connection."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        now = time.monotonic()
        for since, most in self._open.values():
            self.episodes.append((now - since, most))
        self._open.clear()

    def __enter__(self) -> ReceiveQueues:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def held_episodes(self, min_s: float = 0.05) -> list[tuple[float, int]]:
        """Stretches in which a request waited at least ``min_s``: requests held by a mute."""
        return [e for e in self.episodes if e[0] >= min_s]

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL_S):
            self._sample(time.monotonic())

    def _sample(self, now: float) -> None:
        self.samples += 1
        waiting: dict[str, int] = {}
        with open("/proc/net/tcp") as table:
            next(table)
            for row in table:
                fields = row.split()
                local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
                if state != "01" or local.rpartition(":")[2] not in self._ports:
                    continue  # not an established connection to the gateway
                unread = int(queues.partition(":")[2], 16)
                if unread:
                    waiting[remote] = unread
        for remote, unread in waiting.items():
            since, most = self._open.get(remote, (now, 0))
            self._open[remote] = (since, max(most, unread))
        for remote in [r for r in self._open if r not in waiting]:
            since, most = self._open.pop(remote)
            self.episodes.append((now - since, most))
