"""Record-and-check throughput of the quota engine, the per-request cost in the gateway.

Run: ``.venv/bin/python benchmarks/engine.py`` (``--keys``, ``--calls``, ``--cpu``). Prints
median microseconds per call and calls per second for the produce manager with many live
sharing keys and for the controller-mutation manager; then for one produce request decided
whole (``quota.decide``: the produce and request quotas, as the gateway and the replay call it),
with no tenant (``--no-tenant-level`` leaves out the cases that need tenants, so the script
also runs on a tree from before them) and with every request in one of 100 tenants whose
default tenant quota applies (issue 25: the second level's cost).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from quotagate.quota import (
    DEFAULT,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    QuotaManagers,
    RequestFacts,
    classify,
    decide,
)

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


def decide_case(keys: int, tenants: int) -> Callable[[int], None]:
    """One produce of 1 KiB decided whole per call, ``keys`` clients at random; with
    ``tenants`` > 0 each client is in one of that many tenants, all under a default tenant
    quota (and the facts name it), else no tenant is configured at all."""
    managers = QuotaManagers.create()
    managers.update_quota({"client-id": None}, "producer_byte_rate", 10_000_000)
    managers.update_quota({"client-id": None}, "request_percentage", 1_000_000)
    if tenants:
        managers.update_quota({"tenant": None}, "producer_byte_rate", 1_000_000_000)
        managers.update_quota({"tenant": None}, "request_percentage", 1_000_000)
    charging = classify(0, 9, acks=1)
    clients = [f"client-{i}" for i in range(keys)]
    teams = [f"team-{i % tenants}" for i in range(keys)] if tenants else []

    def facts_of(k: int, now_ms: int) -> RequestFacts:
        if tenants:
            return RequestFacts(
                charging, "ANONYMOUS", clients[k], 0, 9, now_ms, 1024, 0, (), 50_000,
                tenant=teams[k],
            )  # fmt: skip
        return RequestFacts(charging, "ANONYMOUS", clients[k], 0, 9, now_ms, 1024, 0, (), 50_000)

    for k in range(keys):  # warm every sharing key
        decide(managers, facts_of(k, T0))
    rng = random.Random(1)
    order = [rng.randrange(keys) for _ in range(100_000)]
    clock = [0]

    def run(calls: int) -> None:
        tick = clock[0]
        for i in range(calls):
            tick += 1
            decide(managers, facts_of(order[i % 100_000], T0 + tick // 10))
        clock[0] = tick

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
    parser.add_argument(
        "--no-tenant-level",
        action="store_true",
        help="leave out the cases with tenants (for a tree from before issue 25)",
    )
    args = parser.parse_args()
    clock = time.process_time_ns if args.cpu else time.perf_counter_ns
    print(f"{'case':<44} {'median µs/call':>15} {'calls/s':>12}")
    cases = [
        (f"produce record-and-check, {args.keys} keys", produce_case(args.keys)),
        ("controller-mutation record-and-check", mutation_case()),
        ("produce decided, 1000 clients, no tenant", decide_case(1000, 0)),
    ]
    if not args.no_tenant_level:
        cases.append(("produce decided, 1000 clients in 100 tenants", decide_case(1000, 100)))
    for name, run in cases:
        us = _median_us(run, args.calls, args.repeats, clock)
        print(f"{name:<44} {us:>15.2f} {1e6 / us:>12,.0f}")


if __name__ == "__main__":
    main()
