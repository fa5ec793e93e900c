"""Sequences for Kafka's classes and the engine to play (tests/kafka/differential).

A sequence is ``(kind, setup, ops)``: clock steps that land on and beside window boundaries,
past the S windows a sample lives and past the hour a sensor idles; quotas set, changed and
removed at all eight entity levels mid-stream; several users and client ids (names that need
sanitising among them); mutation bursts; stats whose window count and size change under them.

Each generator draws its choices from a ``Source``, a ``random.Random`` seeded with the
sequence's seed (``sequence(kind, seed)``), so a seed names its sequence on every
machine (about 0.2 ms a sequence, where drawing each choice through Hypothesis cost 50).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from support.kafka_judge import DEFAULT_NAME, START_MS

T = TypeVar("T")
BOUNDS_SHARE: Final = 0.125
Drawn = tuple[str, dict[str, Any], list[list[Any]]]

HOUR_MS: Final = 3_600_000
USERS: Final = ("alice", "bob", "ANONYMOUS", "us er@x.org", "é/ü")
CLIENTS: Final = ("c1", "c2", "", "app:1")
STARTS: Final = (START_MS, START_MS + 1, START_MS + 999, START_MS + 1000, 0, 1, 42_000)
STATS: Final = (
    "rate",
    "simple_rate",
    "token_bucket",
    "avg",
    "max",
    "min",
    "windowed_sum",
    "windowed_count",
    "cumulative_sum",
)


class Source:
    """The choices of one sequence, from a generator seeded with its seed. One number in eight
    is a bound of its range, where off-by-one and rounding differences live (Hypothesis, which
    drew them before, leans to bounds the same way)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        if self._random.random() < BOUNDS_SHARE:
            return self._random.choice((low, high))
        return self._random.randint(low, high)

    def real(self, low: float, high: float) -> float:
        if self._random.random() < BOUNDS_SHARE:
            return self._random.choice((low, high))
        return self._random.uniform(low, high)

    def choice(self, values: Sequence[T]) -> T:
        return self._random.choice(values)


# -- pieces --------------------------------------------------------------------------------


def start(src: Source) -> int:
    return src.choice(STARTS) if src.integer(0, 1) else src.integer(0, 2 * START_MS)


def clock_step(src: Source, window_ms: int, samples: int) -> int:
    """None, a ms, on and beside window boundaries, past the ring's span, past the hour of
    sensor expiry, days."""
    span = window_ms * samples
    way = src.integer(0, 2)
    if way == 0:
        return src.choice(
            (
                0,
                1,
                window_ms - 1,
                window_ms,
                window_ms + 1,
                2 * window_ms,
                span - 1,
                span,
                span + 1,
                span + window_ms,
                HOUR_MS - 1,
                HOUR_MS,
                HOUR_MS + 1,
                HOUR_MS + span,
                10 * 86_400_000,
            )
        )
    return src.integer(0, window_ms if way == 1 else 3 * span)


def quota_entity(src: Source, users: Sequence[str], clients: Sequence[str]) -> list[Any]:
    """One of Kafka's eight entity levels (user, client or both; a name or the default)."""
    user = src.choice((None, DEFAULT_NAME, *users))
    client = src.choice((None, DEFAULT_NAME, *clients))
    if user is None and client is None:
        client = src.choice((DEFAULT_NAME, *clients))
    return [user, client]


def quota_value(src: Source, scale: float) -> float | None:
    """A quota near ``scale`` (whole, fractional, or the odd extreme), or None: removed."""
    way = src.integer(0, 5)
    if way == 0:
        return None
    if way in (1, 2):
        return float(src.integer(1, 20) * scale)
    if way in (3, 4):
        return src.real(0.05, 20.0) * scale
    return src.choice((scale, 9.223372036854776e18, 1e-3 * scale))


def amount(src: Source, scale: float) -> float:
    """A recorded amount near ``scale``: whole, fractional, zero."""
    way = src.integer(0, 4)
    if way < 2:
        return float(src.integer(0, 30) * scale)
    if way < 4:
        return src.real(0.0, 30.0) * scale
    return 0.0


def _clients(src: Source) -> tuple[tuple[str, ...], tuple[str, ...]]:
    users = tuple(dict.fromkeys(src.choice(USERS) for _ in range(src.integer(1, 3))))
    clients = tuple(dict.fromkeys(src.choice(CLIENTS) for _ in range(src.integer(1, 3))))
    return users, clients


def _manager_setup(src: Source) -> dict[str, Any]:
    return {"samples": src.integer(1, 12), "window_s": src.integer(1, 3), "start_ms": start(src)}


COMMON_OPS: Final = (
    ("advance",) * 6
    + ("update",) * 3
    + ("measure",) * 2
    + ("throttle", "reap", "quota", "max_value", "enabled", "queue_size", "expire")
)


def common_op(
    src: Source,
    setup: dict[str, Any],
    users: Sequence[str],
    clients: Sequence[str],
    scale: float,
    channel: int,
) -> list[Any]:
    """An operation every ClientQuotaManager has."""
    window_ms = setup["window_s"] * 1000
    choice = src.choice(COMMON_OPS)
    if choice == "advance":
        return ["advance", clock_step(src, window_ms, setup["samples"])]
    if choice == "update":
        return ["update", *quota_entity(src, users, clients), quota_value(src, scale)]
    if choice in ("reap", "enabled", "queue_size", "expire"):
        return [choice]
    user, client = src.choice(users), src.choice(clients)
    if choice == "throttle":
        return ["throttle", user, client, src.integer(1, 3 * window_ms), channel]
    return [choice, user, client]


# -- one generator per Kafka class ---------------------------------------------------------


def client_sequence(src: Source) -> Drawn:
    """ClientQuotaManager for produce or fetch: bytes recorded, checked and taken back."""
    setup = _manager_setup(src)
    setup["type"] = src.choice(("produce", "fetch"))
    users, clients = _clients(src)
    scale = src.choice((1.0, 100.0, 1000.0, 1e6))
    ops: list[list[Any]] = [["update", *quota_entity(src, users, clients), scale]]
    for _ in range(src.integer(1, 40)):
        kind = src.choice(("record",) * 5 + ("common",) * 5 + ("no_throttle", "unrecord"))
        if kind == "common":
            ops.append(common_op(src, setup, users, clients, scale, len(ops)))
            continue
        name = {"record": "record", "no_throttle": "record_no_throttle"}.get(kind, kind)
        ops.append([name, src.choice(users), src.choice(clients), amount(src, scale)])
    ops.append(["measure", users[0], clients[0]])
    return "client", setup, ops


def request_sequence(src: Source) -> Drawn:
    """ClientRequestQuotaManager: thread time in nanoseconds, as a percentage of one thread."""
    setup = _manager_setup(src)
    users, clients = _clients(src)
    scale = src.choice((0.5, 10.0, 100.0, 400.0))  # percent of one thread

    def nanos() -> int:
        if src.integer(0, 3) == 0:
            return src.choice((0, 1, 10_000_000))
        return src.integer(0, int(scale * 3e8))

    ops: list[list[Any]] = [["update", *quota_entity(src, users, clients), scale]]
    for _ in range(src.integer(1, 40)):
        kind = src.choice(("record",) * 5 + ("common",) * 5 + ("network", "exempt"))
        if kind == "common":
            ops.append(common_op(src, setup, users, clients, scale, len(ops)))
        elif kind == "exempt":
            ops.append(["exempt", nanos()] if src.integer(0, 1) else ["measure_exempt"])
        else:
            name = "record_nanos" if kind == "record" else "record_network"
            ops.append([name, src.choice(users), src.choice(clients), nanos()])
    ops.append(["measure", users[0], clients[0]])
    ops.append(["measure_exempt"])
    return "request", setup, ops


def controller_sequence(src: Source) -> Drawn:
    """ControllerMutationQuotaManager: strict and permissive quotas, bursts of mutations."""
    setup = _manager_setup(src)
    users, clients = _clients(src)
    scale = src.choice((0.5, 2.0, 10.0, 50.0))  # partition mutations per second

    def partitions() -> int:
        return src.integer(0, int(4 * scale) + 5 if src.integer(0, 2) else 1000)

    ops: list[list[Any]] = [["update", *quota_entity(src, users, clients), scale]]
    handles = 0
    for _ in range(src.integer(1, 40)):
        kind = src.choice(("request",) * 3 + ("burst",) * 2 + ("common",) * 4 + ("mutation",))
        user, client = src.choice(users), src.choice(clients)
        if kind in ("request", "burst"):
            # One request: a quota object, a record per topic, then its throttle.
            mode = src.choice(("strict", "permissive"))
            ops.append(["new_quota", handles, mode, user, client])
            for _ in range(src.integer(1, 12 if kind == "burst" else 3)):
                ops.append(["qrecord", handles, partitions()])
                if src.integer(0, 5) == 0:
                    ops.append(["advance", src.integer(0, 1500)])
            ops.append(["qthrottle", handles])
            ops.append(["qexceeded", handles])
            handles += 1
        elif kind == "mutation":
            ops.append(["record_mutation", user, client, float(partitions())])
        else:
            op = common_op(src, setup, users, clients, scale, len(ops))
            ops.append(op)
            if op[0] == "advance" and handles and src.integer(0, 1):
                # Time passes over an earlier request's throttle: it decays.
                ops.append(["qthrottle", src.integer(0, handles - 1)])
    ops.append(["measure", users[0], clients[0]])
    return "controller", setup, ops


def _stat_config(src: Source) -> dict[str, Any]:
    way = src.integer(0, 2)
    quota = None if way == 0 else float(src.integer(1, 500)) if way == 1 else src.real(0.01, 1e4)
    config: dict[str, Any] = {
        "samples": src.integer(1, 6),
        "window_ms": src.choice((1, 7, 100, 1000, 30_000)),
        "quota": quota,
    }
    if quota is not None:
        config["upper"] = bool(src.integer(0, 1))
    return config


def metrics_sequence(src: Source) -> Drawn:
    """A Sensor of the metrics library: stats with quotas, windows changed under them."""
    stats = [{"stat": src.choice(STATS), **_stat_config(src)} for _ in range(src.integer(1, 4))]
    setup = {"stats": stats, "start_ms": start(src)}

    def value() -> float:
        way = src.integer(0, 2)
        if way == 0:
            return float(src.integer(-10, 1000))
        return src.real(-1e3, 1e6) if way == 1 else src.choice((0.0, -0.0, 1.0))

    ops: list[list[Any]] = []
    for _ in range(src.integer(1, 40)):
        kind = src.choice(("record",) * 5 + ("advance",) * 4 + ("check", "measure", "config"))
        if kind == "record":
            ops.append(["srecord", value(), bool(src.integer(0, 1))])
        elif kind == "advance":
            ops.append(["advance", clock_step(src, stats[0]["window_ms"], stats[0]["samples"])])
        elif kind == "check":
            ops.append(["scheck"])
        elif kind == "measure":
            ops.append(["smeasure", src.integer(0, len(stats) - 1)])
        else:
            ops.append(["sconfig", src.integer(0, len(stats) - 1), _stat_config(src)])
    ops.extend(["smeasure", index] for index in range(len(stats)))
    return "metrics", setup, ops


def backoff_sequence(src: Source) -> Drawn:
    """ExponentialBackoff without jitter (its deterministic part)."""
    setup = {
        "initial_ms": src.integer(0, 2000) if src.integer(0, 1) else src.choice((1, 50, 100)),
        "multiplier": src.integer(2, 10),
        "max_ms": src.integer(0, 200_000) if src.integer(0, 1) else src.choice((1000, 1 << 40)),
        "jitter": 0.0,
    }
    ops = [
        ["backoff", src.integer(0, 64) if src.integer(0, 1) else src.integer(0, 1 << 40)]
        for _ in range(src.integer(1, 20))
    ]
    return "backoff", setup, ops


GENERATORS: Final[dict[str, Callable[[Source], Drawn]]] = {
    "client": client_sequence,
    "request": request_sequence,
    "controller": controller_sequence,
    "metrics": metrics_sequence,
    "backoff": backoff_sequence,
}


def sequence(kind: str, seed: int) -> Drawn:
    """The sequence of ``kind`` that ``seed`` names."""
    return GENERATORS[kind](Source(seed))
