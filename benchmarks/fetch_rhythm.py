"""Which rhythm greedy consumers settle into, by when a throttled fetch's clock starts:
simulated on the engine, no broker.

    python benchmarks/fetch_rhythm.py [--runs 8] [--seconds 48]

N connections of one client id fetch responses of R bytes as fast as they are let, under
``consumer_byte_rate`` 1 MB/s with 2 x 1 s windows (the engine's ``ClientQuotaManager``:
record, check, and take a throttled fetch's bytes back). A ``java`` client waits the
throttle it is told from when it hears it; an ``rdk`` client sends again at once and the
mute decides when its next fetch is read. Sides:

- ``kafka``: recorded as handled, answered at once (empty when throttled);
- ``old``: the gateway before issue 31's fetch change: recorded at the request's stamp,
  decided when the upstream's answer arrives (2-32 ms later for 1 MB, data included),
  throttle written whole and the mute run from the written answer;
- ``stamp``: the gateway now: the mute runs from the stamp, the answer tells what is left.

Prints delivered ÷ quota per side over ``--runs`` seeds. With 1 MB responses under these
windows a run settles into two responses every third second (0.667) or one about every
1.3 s (0.73-0.81); a throttled answer delayed by a varying upstream time (``old``) moves the
Java clients toward the faster one. docs/engine.md ("Fetch") quotes a run of this.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.store.quotas import Change

QUOTA = 1_000_000.0
CLIENT = "c"
USER = "ANONYMOUS"
HOP_MS = 0.3


def delivered(
    seed: int,
    side: str,
    client: str,
    response_bytes: int,
    upstream_ms: tuple[float, float],
    *,
    connections: int = 20,
    seconds: float = 48.0,
    warm_up_s: float = 5.0,
) -> float:
    """Delivered ÷ quota over ``seconds`` after ``warm_up_s``; ``upstream_ms``: the fetch's
    time upstream through the gateway, least and spread (uniform)."""
    rng = random.Random(seed)
    runtime = QuotaRuntime(QuotaSettings(window_num=2, window_size_s=1))
    runtime.store_sync.alter_client_quotas(
        [Change({"client-id": CLIENT}, "consumer_byte_rate", QUOTA)], "sim", "sim"
    )
    fetch = runtime.managers.fetch
    start = 1_700_000_000_000.0
    end = start + (warm_up_s + seconds) * 1000
    reads = [(start + rng.random() * 50, i) for i in range(connections)]
    heapq.heapify(reads)
    admitted = 0
    while reads:
        read_at, connection = heapq.heappop(reads)
        if read_at > end:
            continue
        if side == "kafka":
            stamp = answered = since = read_at + 0.2 * (1 + rng.random())
        else:
            stamp = read_at
            answered = read_at + upstream_ms[0] + rng.random() * upstream_ms[1]
            since = answered if side == "old" else stamp
        throttle = fetch.record_and_get_throttle_ms(USER, CLIENT, response_bytes, int(stamp))
        told = throttle if side in ("kafka", "old") else max(0, throttle - int(answered - since))
        if throttle == 0:
            admitted += start + warm_up_s * 1000 <= stamp < end
            following = answered + 2 * HOP_MS + response_bytes / 2e5
        else:
            fetch.unrecord(USER, CLIENT, response_bytes, int(stamp))
            heard = answered + HOP_MS
            following = heard + told + HOP_MS if client == "java" else max(heard, since + throttle)
        heapq.heappush(reads, (following, connection))
    return admitted * response_bytes / seconds / QUOTA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=48.0)
    args = parser.parse_args()
    cases = (
        ("java", 1_000_073, (2.0, 30.0)),
        ("java", 16_457, (0.5, 2.0)),
        ("rdk", 16_457, (0.5, 2.0)),
    )
    print("| client | response bytes | side | delivered ÷ quota, mean (min–max) |")
    print("|---|---:|---|---:|")
    for client, size, upstream in cases:
        for side in ("kafka", "old", "stamp"):
            rates = [
                delivered(seed, side, client, size, upstream, seconds=args.seconds)
                for seed in range(args.runs)
            ]
            print(
                f"| {client} | {size} | {side} | {statistics.mean(rates):.3f} "
                f"({min(rates):.3f}–{max(rates):.3f}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
