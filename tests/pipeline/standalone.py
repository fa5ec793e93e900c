"""A real Spark standalone cluster on loopback: one master and N workers, each a JVM
started with the ``spark-class`` of the installed pyspark, as an operator starts them.

The master and workers pick their own ports (0); the master's URL is read from its log,
and the cluster counts as up once every worker has registered.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[\w.:-]+)")
_REGISTERED = "Successfully registered with master"
_LOOPBACK = ("--host", "127.0.0.1", "--port", "0", "--webui-port", "0")


@dataclass(frozen=True, slots=True)
class Cluster:
    url: str
    logs: Path

    def executors(self) -> set[Path]:
        """The stderr log of every executor the workers have started so far."""
        return set(self.logs.parent.glob("worker-*/app-*/*/stderr"))

    def explain(self) -> str:
        """The tails of every daemon's log, for a failure message."""
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            for log in sorted(self.logs.glob("*.log"))
        )


def spark_home() -> Path:
    return Path(pyspark.__file__).parent


@contextmanager
def standalone_cluster(
    work: Path,
    wait_for: Callable[..., Any],
    *,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
) -> Iterator[Cluster]:
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # The daemons only schedule; the executors they start get the application's memory.
        "SPARK_DAEMON_MEMORY": "256m",
    }
    spark_class = str(spark_home() / "bin" / "spark-class")
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> Path:
        log = logs / f"{name}.log"
        with log.open("wb") as out:
            started.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    # Its own process group: a worker's executors go down with it.
                    start_new_session=True,
                )
            )
        return log

    try:
        master_log = start("master", "org.apache.spark.deploy.master.Master", *_LOOPBACK)
        probe = Cluster("", logs)
        found = wait_for(
            lambda: _MASTER_URL.search(master_log.read_text(errors="replace")),
            timeout_s=60,
            what="the Spark master to start",
            explain=probe.explain,
        )
        cluster = Cluster(found.group(1), logs)
        worker_logs: list[Path] = []
        for i in range(workers):
            size = ["--cores", str(cores), "--memory", memory]
            place = ["--work-dir", str(work / f"worker-{i}")]
            worker = [
                "org.apache.spark.deploy.worker.Worker",
                *_LOOPBACK,
                *size,
                *place,
                cluster.url,
            ]
            worker_logs.append(start(f"worker-{i}", *worker))
        wait_for(
            lambda: all(_REGISTERED in log.read_text(errors="replace") for log in worker_logs),
            timeout_s=60,
            what=f"{workers} Spark workers to register",
            explain=cluster.explain,
        )
        yield cluster
    finally:
        for process in reversed(started):
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
