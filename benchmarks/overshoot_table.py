"""What one client over N connections achieves: Kafka's arithmetic, one process, a fleet.

    python benchmarks/overshoot_table.py [--connections 1 5 20] [--seconds 30]

For each N, the client offers twice its quota (1 MB/s) over N connections, each producer
buffering at most 64 KiB (what it cannot hand over is dropped, not queued), 2 x 1 s windows:

* **Kafka, simulated**: Kafka's own engine on one broker for the same send pattern
  (tests/support/fleet_sim.py: a request in flight per connection, each connection muted on
  its own the KIP-219 way), 100 s after a 20 s warm-up;
* **four workers, simulated**: the same, spread over the workers of one instance (the hub);
* **one process** and **four workers**, live: ``quotagate serve`` in front of an embedded
  tansu, real confluent-kafka producers, measured from the usage events.

Prints a Markdown table (achieved ÷ quota). ``--greedy`` prints instead, simulated only, what
Kafka's arithmetic lets a greedy client through over N connections (each sending a request
every 10 ms whenever it is not muted) for requests of a growing share of a second's quota.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from quotagate.gateway.embedded import TansuBroker
from support.fleet_load import offer, wire_rate
from support.fleet_sim import QUOTA as SIM_QUOTA
from support.fleet_sim import run_fleet
from support.instances import Instance

QUOTA = 1_000_000.0
VALUE = b"o" * 4096
WARM_UP_S = 5.0
WORKERS = 4


def simulated(workers: int, connections: int) -> float:
    run = run_fleet(
        workers, connections, 120_000, hub_ms=20 if workers > 1 else 0, offered=2.0, window_num=2
    )
    return run.ratio(20_000, 120_000)


def live(broker: TansuBroker, tmp: Path, workers: int, connections: int, seconds: float) -> float:
    instance = Instance(tmp, broker.bootstrap, workers, True, QUOTA)
    try:
        start = offer(
            [instance.bootstrap] * connections,
            2 * QUOTA,
            WARM_UP_S + seconds + 1,
            VALUE,
            buffer_kbytes=64,
        )
    finally:
        instance.stop()
    return wire_rate(instance.usage, start + WARM_UP_S, seconds) / QUOTA


def _greedy_ratio(connections: int, share: float) -> float:
    request_bytes = round(share * SIM_QUOTA)
    run = run_fleet(1, connections, 80_000, window_num=2, request_bytes=request_bytes)
    return run.ratio(20_000, 80_000)


def greedy(connections: list[int]) -> None:
    shares = (0.004, 0.008, 0.016, 0.04, 0.16)
    print("| connections | " + " | ".join(f"request {s:.1%} of quota x 1 s" for s in shares) + " |")
    print("|---:|" + "---:|" * len(shares))
    for n in connections:
        # A request every 10 ms offers 100 x share x n quotas: below 2 the client is not
        # held by its quota at all, and the cell says nothing.
        cells = [f"{_greedy_ratio(n, s):.3f}" if 100 * s * n >= 2 else "–" for s in shares]
        print(f"| {n} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--greedy", action="store_true", help="the simulated greedy table only")
    args = parser.parse_args()
    if args.greedy:
        greedy(args.connections)
        return
    print("| connections | Kafka, simulated | 4 workers, simulated | one process | 4 workers |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp, TansuBroker() as broker:
        for n in args.connections:
            kafka = simulated(1, n)
            fleet_sim = simulated(WORKERS, n) if n >= WORKERS else float("nan")
            one = live(broker, Path(tmp) / f"one-{n}", 1, n, args.seconds)
            fleet = live(broker, Path(tmp) / f"fleet-{n}", WORKERS, n, args.seconds)
            print(f"| {n} | {kafka:.3f} | {fleet_sim:.3f} | {one:.3f} | {fleet:.3f} |", flush=True)


if __name__ == "__main__":
    main()
