"""The synthetic client population behind ``generate``: who talks, how much, and when.

Everything is drawn from one seeded generator, so a seed names one population; chunks of
events drawn from it (see ``synthetic``) are independent of how Spark splits the work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# Roles decide the API mix and the size distributions of a client's requests.
PRODUCER, CONSUMER, ADMIN = 0, 1, 2
SHARED_CLIENT_IDS = ("console-consumer", "kafka-python-producer", "rdkafka")


@dataclass(frozen=True, slots=True)
class Population:
    start_ms: int
    duration_s: int
    principals: list[str]
    client_ids: list[str]
    hosts: list[str]
    gateways: list[str]
    listeners: list[str]
    role: npt.NDArray[np.int8]
    weight: npt.NDArray[np.float64]  # share of all events, heavy-tailed
    size_log_mean: npt.NDArray[np.float64]  # log of the typical payload in bytes
    burst_start_s: npt.NDArray[np.float64]  # (clients, bursts) offsets from start
    burst_len_s: npt.NDArray[np.float64]
    burst_fraction: npt.NDArray[np.float64]  # share of a client's events inside bursts
    strict_admin: npt.NDArray[np.bool_]  # admin client on KIP-599 strict versions
    topics: list[list[str]]
    cycle_cdf_s: npt.NDArray[np.float64]  # inverse CDF grid of the daily cycle
    cycle_cdf_p: npt.NDArray[np.float64]

    @property
    def size(self) -> int:
        return len(self.client_ids)


def build_population(
    seed: int, *, users: int, start_ms: int, duration_s: int, bursts: int = 3
) -> Population:
    rng = np.random.default_rng([seed, 0xC11E])
    principals: list[str] = []
    client_ids: list[str] = []
    roles: list[int] = []
    for u in range(users):
        user = f"User:svc-{u:03d}" if u % 7 else f"User:team-{u:03d}@corp"
        role_of_user = ADMIN if u % 10 == 9 else int(rng.integers(0, 2))
        for c in range(int(rng.integers(1, 5))):
            principals.append(user)
            if rng.random() < 0.1:
                client_ids.append(SHARED_CLIENT_IDS[int(rng.integers(0, len(SHARED_CLIENT_IDS)))])
            else:
                client_ids.append(f"{('producer', 'consumer', 'admin')[role_of_user]}-{u}-{c}")
            roles.append(role_of_user)
    n = len(client_ids)
    role = np.array(roles, dtype=np.int8)
    # Pareto weights: a few clients carry most of the traffic, as in real clusters.
    weight = rng.pareto(1.2, n) + 0.05
    weight[role == ADMIN] *= 0.05
    weight /= weight.sum()
    size_log_mean = np.where(role == PRODUCER, rng.normal(8.5, 1.2, n), rng.normal(10.0, 1.0, n))
    burst_len_s = rng.uniform(60, 600, (n, bursts))
    burst_len_s[role == ADMIN] = rng.uniform(5, 60, (int((role == ADMIN).sum()), bursts))
    burst_start_s = rng.uniform(0, 1, (n, bursts)) * np.maximum(duration_s - burst_len_s, 0)
    burst_fraction = np.where(role == ADMIN, 0.9, rng.uniform(0.02, 0.25, n))
    hosts = [f"10.{i // 250 % 250}.{i % 250}.{int(rng.integers(2, 250))}" for i in range(n)]
    topics = [
        [f"topic-{int(t)}" for t in rng.choice(60, int(rng.integers(1, 4)), replace=False)]
        for _ in range(n)
    ]
    cdf_s, cdf_p = _daily_cycle(start_ms, duration_s)
    return Population(
        start_ms=start_ms,
        duration_s=duration_s,
        principals=principals,
        client_ids=client_ids,
        hosts=hosts,
        gateways=["gw-1", "gw-2"],
        listeners=["PLAINTEXT", "SASL_SSL"],
        role=role,
        weight=weight,
        size_log_mean=size_log_mean,
        burst_start_s=burst_start_s,
        burst_len_s=burst_len_s,
        burst_fraction=burst_fraction,
        strict_admin=rng.random(n) < 0.7,
        topics=topics,
        cycle_cdf_s=cdf_s,
        cycle_cdf_p=cdf_p,
    )


def _daily_cycle(
    start_ms: int, duration_s: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Inverse-CDF grid of an intensity that peaks mid-afternoon UTC and dips at night."""
    grid = np.linspace(0.0, float(duration_s), 1 + max(2, duration_s // 60))
    hour = ((start_ms / 1000.0 + grid) / 3600.0) % 24.0
    intensity = 1.0 + 0.7 * np.sin(2 * np.pi * (hour - 9.0) / 24.0)
    cumulative = np.concatenate([[0.0], np.cumsum((intensity[1:] + intensity[:-1]) / 2)])
    return grid, cumulative / cumulative[-1]
