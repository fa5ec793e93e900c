"""Reconnect storm: N admin clients against a broker that is down, KIP-580 exponential
reconnect backoff against a static 100 ms backoff, measured side by side in one run.

Run: ``.venv/bin/python benchmarks/backoff_storm.py`` (``--clients``, ``--seconds``).

The "down" broker is a loopback port with nothing listening: every connect is refused at
once, so the spacing of attempts is the client's backoff alone and not the accept loop or
error path of a server (the gateway with its upstream down would accept the TCP connection
and measure its own behaviour as much as the client's). All groups run concurrently in one
event loop against the same port, so machine noise hits them equally.

Groups (each ``--clients`` clients, real ``AdminClient`` instances):

* ``static 100 ms``: ``reconnect.backoff.ms=100`` alone, which by Kafka's rule (spec §7.2)
  sets ``reconnect.backoff.max.ms=100``: a constant 100 ms, the pre-KIP-580 behaviour;
* ``exponential 100..1000 ms``: the KIP-580 seed's worked example (initial 100, max 1000,
  base 2, jitter 0.2): tries at 0, 100, 300, 700 ms, so 4 in the first second against 10;
* ``Kafka defaults 50..1000 ms``: ``reconnect.backoff.ms`` 50, ``reconnect.backoff.max.ms``
  1000.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from dataclasses import dataclass, field

from quotagate.client import AdminClient, AdminConfig, ClientEvents, KafkaTimeoutError
from quotagate.client.config import Address
from quotagate.gateway.embedded import LOOPBACK, free_port

SEED_FIRST_SECOND = {"static 100 ms": 10, "exponential 100..1000 ms": 4}


@dataclass
class Attempts(ClientEvents):
    times_ms: list[float] = field(default_factory=list)

    def connect_attempt(self, node_id: int, now_ms: float) -> None:
        self.times_ms.append(now_ms)


@dataclass(frozen=True)
class Group:
    name: str
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int | None


GROUPS = (
    Group("static 100 ms", 100, None),
    Group("exponential 100..1000 ms", 100, 1000),
    Group("Kafka defaults 50..1000 ms", 50, 1000),
)


async def _one_client(address: Address, group: Group, seconds: float) -> list[float]:
    events = Attempts()
    config = AdminConfig(
        (address,),
        default_api_timeout_ms=int(seconds * 1000),
        reconnect_backoff_ms=group.reconnect_backoff_ms,
        reconnect_backoff_max_ms=group.reconnect_backoff_max_ms,
    )
    async with AdminClient(config, events=events) as admin:
        try:
            await admin.describe_client_quotas()
        except KafkaTimeoutError:
            pass  # expected: nothing ever answers
        else:
            raise RuntimeError(f"something answered on {address}")
    start = events.times_ms[0]
    return [t - start for t in events.times_ms]


@dataclass(frozen=True)
class Summary:
    group: str
    first_second: list[int]
    per_second: list[float]
    total_rate: float


def _summarise(group: Group, runs: list[list[float]], seconds: float) -> Summary:
    buckets = int(seconds)
    per_second = [
        sum(1 for run in runs for t in run if b * 1000 <= t < (b + 1) * 1000) / len(runs)
        for b in range(buckets)
    ]
    total = sum(len(run) for run in runs) / seconds
    return Summary(group.name, [sum(1 for t in run if t < 1000) for run in runs], per_second, total)


async def run(clients: int, seconds: float) -> list[Summary]:
    address = Address(LOOPBACK, free_port())  # nothing listens there
    tasks = {
        group: [asyncio.create_task(_one_client(address, group, seconds)) for _ in range(clients)]
        for group in GROUPS
    }
    summaries = []
    for group, group_tasks in tasks.items():
        runs = await asyncio.gather(*group_tasks)
        summaries.append(_summarise(group, runs, seconds))
    return summaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50, help="clients per group")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the storm")
    args = parser.parse_args()
    summaries = asyncio.run(run(args.clients, args.seconds))
    print(
        f"{args.clients} clients per group, {args.seconds:g} s, refused loopback port; "
        "attempts per client"
    )
    header = " | ".join(f"s{i}" for i in range(int(args.seconds)))
    print(f"| group | 1st second (min/mean/max) | seed | {header} | all clients, attempts/s |")
    for s in summaries:
        seed = SEED_FIRST_SECOND.get(s.group, "-")
        first = f"{min(s.first_second)}/{statistics.mean(s.first_second):.2f}/{max(s.first_second)}"
        buckets = " | ".join(f"{v:.2f}" for v in s.per_second)
        print(f"| {s.group} | {first} | {seed} | {buckets} | {s.total_rate:.0f} |")
    static, exponential = summaries[0], summaries[1]
    print(
        f"exponential/static attempts over the run: "
        f"{exponential.total_rate / static.total_rate:.3f}"
    )


if __name__ == "__main__":
    main()
