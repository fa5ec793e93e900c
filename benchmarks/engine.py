"""Record-and-check throughput of the quota engine, the per-request cost in the gateway.

Run: ``.venv/bin/python benchmarks/engine.py`` (``--keys``, ``--calls``, ``--cpu``). Prints
median microseconds per call and calls per second for the produce manager with many live
sharing keys and for the controller-mutation manager.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from quotagate.quota import DEFAULT, ClientQuotaManager, ControllerMutationQuotaManager

T0 = 1_700_000_000_000


def _median_us(
    run: Callable[[int], None], calls: int, repeats: int, clock: Callable[[], int]
) -> float:
    timings = []
    for _ in range(repeats):
        start = clock()
        run(calls)
        timings.append((clock() - start) / calls / 1000)
    return statistics.median(timings)


def produce_case(keys: int) -> Callable[[int], None]:
    manager = ClientQuotaManager("produce")
    manager.update_quota(None, DEFAULT, 10_000_000)
    clients = [f"client-{i}" for i in range(keys)]
    for client in clients:  # warm every sharing key so the sensors are live
        manager.record_and_get_throttle_ms("ANONYMOUS", client, 1000, T0)
    rng = random.Random(1)
    order = [rng.choice(clients) for _ in range(100_000)]
    clock = [0]

    def run(calls: int) -> None:
        # Ten requests per millisecond, spread over all the keys.
        record = manager.record_and_get_throttle_ms
        tick = clock[0]
        for i in range(calls):
            tick += 1
            record("ANONYMOUS", order[i % 100_000], 1024, T0 + tick // 10)
        clock[0] = tick

    return run


def mutation_case() -> Callable[[int], None]:
    manager = ControllerMutationQuotaManager()
    manager.update_quota(None, DEFAULT, 1_000_000)
    clock = [T0]

    def run(calls: int) -> None:
        record = manager.record_and_get_throttle_ms
        now = clock[0]
        for _ in range(calls):
            now += 1
            record("admin", "tool", 4, now)
        clock[0] = now

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time with the process's CPU clock instead of the wall clock (steadier on a "
        "shared machine)",
    )
    args = parser.parse_args()
    clock = time.process_time_ns if args.cpu else time.perf_counter_ns
    print(f"{'case':<44} {'median µs/call':>15} {'calls/s':>12}")
    for name, run in (
        (f"produce record-and-check, {args.keys} keys", produce_case(args.keys)),
        ("controller-mutation record-and-check", mutation_case()),
    ):
        us = _median_us(run, args.calls, args.repeats, clock)
        print(f"{name:<44} {us:>15.2f} {1e6 / us:>12,.0f}")


if __name__ == "__main__":
    main()
