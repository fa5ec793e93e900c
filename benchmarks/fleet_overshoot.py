"""How far a fleet lets one client past its quota, against the exchange interval.

    python benchmarks/fleet_overshoot.py [--instances 4] [--connections 8] [--seconds 20]

One tansu broker; one client id offering twice its quota over ``--connections`` producers
spread evenly over ``--instances`` in-process gateway instances sharing usage every
``exchange.interval.ms`` (50, 100, 250, 1000), next to one instance carrying all the
connections (the baseline: Kafka's own behaviour with several connections). Runs go two at
a time. The delay term (docs/fleet.md): a delay shifts peers' usage, it does not lose it, so
over a span of S seconds what the fleet's members have not heard of yet is

    delay term = (N - 1)/N * O * (T + d) / S

with N members, O the offered load in quotas, T the interval and d the publish-to-read-back
delay.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from quotagate.gateway.embedded import TansuBroker
from support.fleet_load import FleetRun

INTERVALS_MS = (50, 100, 250, 1000)
ECHO_MS = 5.0  # p50 publish-to-read-back on loopback tansu (fleet_report_echo_ms)


def delay_term(run: FleetRun) -> float:
    lag_s = (run.interval_ms + ECHO_MS) / 1000
    return (run.instances - 1) / run.instances * run.offered * lag_s / run.measure_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    runs = {"baseline": FleetRun(instances=1, connections=args.connections, measure_s=args.seconds)}
    for interval in INTERVALS_MS:
        runs[f"{interval}"] = FleetRun(
            instances=args.instances,
            interval_ms=interval,
            connections=args.connections,
            measure_s=args.seconds,
        )
    results: dict[str, float] = {}
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:

        def run(name: str) -> None:
            results[name] = runs[name].achieved(broker.bootstrap, Path(tmp) / name)

        names = list(runs)
        for pair in (names[i : i + 2] for i in range(0, len(names), 2)):
            threads = [threading.Thread(target=run, args=(name,)) for name in pair]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    baseline = results["baseline"]
    print(f"baseline (1 instance, {args.connections} connections): {baseline:.3f} x quota")
    print("| interval ms | achieved / quota | excess over baseline | delay term |")
    print("|---|---|---|---|")
    for interval in INTERVALS_MS:
        achieved = results[f"{interval}"]
        print(
            f"| {interval} | {achieved:.3f} | {100 * (achieved - baseline):+.1f} % "
            f"| {100 * delay_term(runs[f'{interval}']):.1f} % |"
        )


if __name__ == "__main__":
    main()
