"""A fleet left running: one client over many connections, for as long as you ask.

    python benchmarks/fleet_soak.py [--minutes 30] [--baseline-minutes 5] [--slice-minutes 5]
                                    [--workers 4] [--connections 20] [--idle-minutes 0]

On one embedded tansu broker (started here, as `make run` does):

1. **one process** (``quotagate serve --workers 1``, the exchange on) for
   ``--baseline-minutes``: the client's achieved ÷ quota, the figure a fleet is held to;
2. **the fleet** (``--workers N``) for ``--minutes``, after ``--idle-minutes`` with no
   client at all (an idle fleet must stay healthy too).

The client is ``--connections`` confluent-kafka producers of one client id offering twice
its quota with 64 KiB buffers; beside it, four producers of another client id without a
quota send a steady background. Kafka's default windows (11 x 1 s). Every ``--slice-minutes``
it prints: tansu's CPU, every worker's ``fleet_exchange_healthy`` and report echo p99 (the
worst worker), and achieved ÷ quota over the slice (from the usage events).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from quotagate.gateway.embedded import TansuBroker
from support.fleet_load import offer, wire_rate
from support.instances import Instance

QUOTA = 1_000_000.0
VALUE = b"s" * 4096
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
KAFKA_WINDOWS = (11, 1)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def _gauges(instance: Instance, name: str) -> list[float]:
    pattern = rf"^quotagate_{name}(?:\{{[^}}]*\}})? (\S+)$"
    return [float(m[1]) for m in re.finditer(pattern, instance.metrics(), re.MULTILINE)]


def _echo_p99(instance: Instance) -> float:
    text = instance.metrics()
    found = re.findall(
        r'^quotagate_fleet_report_echo_ms\{quantile="0.99"[^}]*\} (\S+)$', text, re.M
    )
    return max((float(v) for v in found), default=float("nan"))


class Load:
    """The client and the background, in threads, until ``stop``."""

    def __init__(self, bootstrap: str, connections: int, seconds: float) -> None:
        self.start = time.time()
        self._threads = [
            threading.Thread(
                target=offer,
                args=([bootstrap] * connections, 2 * QUOTA, seconds, VALUE, 64),
                daemon=True,
            ),
            threading.Thread(
                target=offer,
                args=([bootstrap] * 4, 0.3 * QUOTA, seconds, VALUE, 64),
                kwargs={"client_id": "background"},
                daemon=True,
            ),
        ]
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join()


def _run(
    name: str,
    broker: TansuBroker,
    tmp: Path,
    workers: int,
    connections: int,
    minutes: float,
    slice_minutes: float,
    idle_minutes: float = 0.0,
) -> list[float]:
    instance = Instance(tmp / name, broker.bootstrap, workers, True, QUOTA, windows=KAFKA_WINDOWS)
    tansu = broker.pid
    slices = max(1, round(minutes / slice_minutes))
    try:
        if idle_minutes:
            cpu0, t0 = _cpu_s(tansu), time.time()
            time.sleep(idle_minutes * 60)
            idle_cpu = 100 * (_cpu_s(tansu) - cpu0) / (time.time() - t0)
            print(
                f"{name} idle {idle_minutes:.0f} min: tansu {idle_cpu:.0f} %"
                f" healthy {_gauges(instance, 'fleet_exchange_healthy')}"
                f" echo p99 {_echo_p99(instance):.0f} ms",
                flush=True,
            )
        load = Load(instance.bootstrap, connections, slices * slice_minutes * 60 + 2)
        for index in range(slices):
            cpu0, t0 = _cpu_s(tansu), time.time()
            healthy_low = 1.0
            deadline = load.start + (index + 1) * slice_minutes * 60
            while time.time() < deadline:
                time.sleep(min(10.0, max(deadline - time.time(), 0.0)))
                healthy_low = min([healthy_low, *_gauges(instance, "fleet_exchange_healthy")])
            print(
                f"{name} slice {index + 1}/{slices}:"
                f"  tansu {100 * (_cpu_s(tansu) - cpu0) / (time.time() - t0):.0f} %"
                f"  healthy (lowest seen) {healthy_low:.0f}"
                f"  echo p99 {_echo_p99(instance):.0f} ms",
                flush=True,
            )
        load.join()
    finally:
        instance.stop()
    # The usage events are whole once the instance has stopped (its writers flush then).
    seconds = slice_minutes * 60
    ratios = [
        wire_rate(instance.usage, load.start + i * seconds, seconds) / QUOTA for i in range(slices)
    ]
    print(f"{name} achieved/quota per slice: {' '.join(f'{r:.3f}' for r in ratios)}", flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--baseline-minutes", type=float, default=5.0)
    parser.add_argument("--slice-minutes", type=float, default=5.0)
    parser.add_argument("--idle-minutes", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--connections", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, TansuBroker() as broker:
        one = _run(
            "one process",
            broker,
            Path(tmp),
            1,
            args.connections,
            args.baseline_minutes,
            args.baseline_minutes,
        )
        fleet = _run(
            f"{args.workers} workers",
            broker,
            Path(tmp),
            args.workers,
            args.connections,
            args.minutes,
            args.slice_minutes,
            args.idle_minutes,
        )
    baseline = statistics.fmean(one)
    worst = max(fleet)
    print(
        f"one process {baseline:.3f}; fleet slices {min(fleet):.3f}-{worst:.3f}; "
        f"worst excess {worst - baseline:+.3f}"
    )


if __name__ == "__main__":
    main()
