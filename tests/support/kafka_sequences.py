"""Hypothesis strategies for the sequences Kafka's classes and the engine both play.

Each strategy draws ``(kind, setup, ops)``: clock steps that land on and beside window
boundaries, past the S windows a sample lives and past the hour a sensor idles; quotas set,
changed and removed at all eight entity levels mid-stream; several users and client ids
(names that need sanitising among them); mutation bursts; stats whose window count and size
change under them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from support.kafka_judge import DEFAULT_NAME, START_MS

Sequence = tuple[str, dict[str, Any], list[list[Any]]]

HOUR_MS = 3_600_000
USERS = ["alice", "bob", "ANONYMOUS", "us er@x.org", "é/ü"]
CLIENTS = ["c1", "c2", "", "app:1"]

starts = st.one_of(
    st.sampled_from([START_MS, START_MS + 1, START_MS + 999, START_MS + 1000, 0, 1, 42_000]),
    st.integers(0, 2 * START_MS),
)


def clock_steps(window_ms: int, samples: int) -> st.SearchStrategy[int]:
    """Steps of the clock: none, a ms, on and beside window boundaries, past the ring's
    span, past the hour of sensor expiry, and days."""
    span = window_ms * samples
    boundaries = [
        0, 1, window_ms - 1, window_ms, window_ms + 1, 2 * window_ms, span - 1, span, span + 1,
        span + window_ms, HOUR_MS - 1, HOUR_MS, HOUR_MS + 1, HOUR_MS + span, 10 * 86_400_000,
    ]
    return st.one_of(
        st.sampled_from([b for b in boundaries if b >= 0]),
        st.integers(0, window_ms),
        st.integers(0, 3 * span),
    )


def entity_names(pool: list[str]) -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), st.just(DEFAULT_NAME), st.sampled_from(pool))


@st.composite
def quota_entities(draw: st.DrawFn, users: list[str], clients: list[str]) -> tuple[Any, Any]:
    """One of Kafka's eight entity levels (user, client or both; a name or the default)."""
    user = draw(entity_names(users))
    client = draw(entity_names(clients))
    if user is None and client is None:
        client = draw(st.sampled_from([DEFAULT_NAME, *clients]))
    return user, client


def quota_values(scale: float) -> st.SearchStrategy[float | None]:
    """A quota near ``scale`` (whole, fractional or the odd extreme), or None: removed."""
    return st.one_of(
        st.none(),
        st.integers(1, 20).map(lambda f: float(f * scale)),
        st.floats(0.05, 20.0).map(lambda f: f * scale),
        st.sampled_from([scale, 9.223372036854776e18, 1e-3 * scale]),
    )


def amounts(scale: float) -> st.SearchStrategy[float]:
    """A recorded amount near ``scale``: whole, fractional, zero."""
    return st.one_of(
        st.integers(0, 30).map(lambda f: float(f * scale)),
        st.floats(0.0, 30.0).map(lambda f: f * scale),
        st.just(0.0),
    )


@st.composite
def _manager_setup(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "samples": draw(st.integers(1, 12)),
        "window_s": draw(st.integers(1, 3)),
        "start_ms": draw(starts),
    }


@st.composite
def _common_op(
    draw: st.DrawFn, setup: dict[str, Any], users: list[str], clients: list[str], scale: float
) -> list[Any]:
    """The operations every ClientQuotaManager has, for one drawn client."""
    window_ms = setup["window_s"] * 1000
    user, client = draw(st.sampled_from(users)), draw(st.sampled_from(clients))
    choice = draw(
        st.sampled_from(
            ["advance"] * 6 + ["update"] * 3 + ["measure"] * 2
            + ["throttle", "reap", "quota", "max_value", "enabled", "queue_size", "expire"]
        )
    )
    if choice == "advance":
        return ["advance", draw(clock_steps(window_ms, setup["samples"]))]
    if choice == "update":
        entity = draw(quota_entities(users, clients))
        return ["update", *entity, draw(quota_values(scale))]
    if choice == "throttle":
        return ["throttle", user, client, draw(st.integers(1, 3 * window_ms)), -1]
    if choice in ("reap", "enabled", "queue_size", "expire"):
        return [choice]
    return [choice, user, client]


def _number_channels(ops: list[list[Any]]) -> list[list[Any]]:
    for index, op in enumerate(ops):
        if op[0] == "throttle":
            op[4] = index
    return ops


@st.composite
def client_sequences(draw: st.DrawFn) -> Sequence:
    """ClientQuotaManager for produce or fetch: bytes recorded, checked and taken back."""
    setup = draw(_manager_setup())
    setup["type"] = draw(st.sampled_from(["produce", "fetch"]))
    users = draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=3, unique=True))
    clients = draw(st.lists(st.sampled_from(CLIENTS), min_size=1, max_size=3, unique=True))
    scale = draw(st.sampled_from([1.0, 100.0, 1000.0, 1e6]))
    ops: list[list[Any]] = [["update", *draw(quota_entities(users, clients)), scale]]
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["record"] * 5 + ["common"] * 5 + ["no_throttle", "unrecord"]))
        user, client = draw(st.sampled_from(users)), draw(st.sampled_from(clients))
        if kind == "record":
            ops.append(["record", user, client, draw(amounts(scale))])
        elif kind == "no_throttle":
            ops.append(["record_no_throttle", user, client, draw(amounts(scale))])
        elif kind == "unrecord":
            ops.append(["unrecord", user, client, draw(amounts(scale))])
        else:
            ops.append(draw(_common_op(setup, users, clients, scale)))
    ops.append(["measure", users[0], clients[0]])
    return "client", setup, _number_channels(ops)


@st.composite
def request_sequences(draw: st.DrawFn) -> Sequence:
    """ClientRequestQuotaManager: thread time in nanoseconds, as a percentage of one thread."""
    setup = draw(_manager_setup())
    users = draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=3, unique=True))
    clients = draw(st.lists(st.sampled_from(CLIENTS), min_size=1, max_size=3, unique=True))
    scale = draw(st.sampled_from([0.5, 10.0, 100.0, 400.0]))  # percent of one thread
    nanos = st.one_of(st.integers(0, int(scale * 3e8)), st.sampled_from([0, 1, 10_000_000]))
    ops: list[list[Any]] = [["update", *draw(quota_entities(users, clients)), scale]]
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["record"] * 5 + ["common"] * 5 + ["network", "exempt"]))
        user, client = draw(st.sampled_from(users)), draw(st.sampled_from(clients))
        if kind == "record":
            ops.append(["record_nanos", user, client, draw(nanos)])
        elif kind == "network":
            ops.append(["record_network", user, client, draw(nanos)])
        elif kind == "exempt":
            ops.append(draw(st.sampled_from([["exempt", draw(nanos)], ["measure_exempt"]])))
        else:
            ops.append(draw(_common_op(setup, users, clients, scale)))
    ops.append(["measure", users[0], clients[0]])
    ops.append(["measure_exempt"])
    return "request", setup, _number_channels(ops)


@st.composite
def controller_sequences(draw: st.DrawFn) -> Sequence:
    """ControllerMutationQuotaManager: strict and permissive quotas, bursts of mutations."""
    setup = draw(_manager_setup())
    users = draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=3, unique=True))
    clients = draw(st.lists(st.sampled_from(CLIENTS), min_size=1, max_size=3, unique=True))
    scale = draw(st.sampled_from([0.5, 2.0, 10.0, 50.0]))  # partition mutations per second
    partitions = st.one_of(st.integers(0, int(4 * scale) + 5), st.integers(0, 1000))
    ops: list[list[Any]] = [["update", *draw(quota_entities(users, clients)), scale]]
    handles = 0
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(
            st.sampled_from(["request"] * 3 + ["burst"] * 2 + ["common"] * 4 + ["mutation"])
        )
        user, client = draw(st.sampled_from(users)), draw(st.sampled_from(clients))
        if kind in ("request", "burst"):
            # One request: a quota object, a record per topic, then its throttle.
            mode = draw(st.sampled_from(["strict", "permissive"]))
            ops.append(["new_quota", handles, mode, user, client])
            topics = draw(st.integers(1, 12 if kind == "burst" else 3))
            for _ in range(topics):
                ops.append(["qrecord", handles, draw(partitions)])
                if draw(st.integers(0, 5)) == 0:
                    ops.append(["advance", draw(st.integers(0, 1500))])
            ops.append(["qthrottle", handles])
            ops.append(["qexceeded", handles])
            handles += 1
        elif kind == "mutation":
            ops.append(["record_mutation", user, client, float(draw(partitions))])
        else:
            op = draw(_common_op(setup, users, clients, scale))
            if op[0] == "advance" and handles and draw(st.booleans()):
                # Time passes over an earlier request's throttle: it decays.
                ops.extend([op, ["qthrottle", draw(st.integers(0, handles - 1))]])
            else:
                ops.append(op)
    ops.append(["measure", users[0], clients[0]])
    return "controller", setup, _number_channels(ops)


STATS = [
    "rate", "simple_rate", "token_bucket", "avg", "max", "min", "windowed_sum",
    "windowed_count", "cumulative_sum",
]


@st.composite
def _stat_config(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = {
        "samples": draw(st.integers(1, 6)),
        "window_ms": draw(st.sampled_from([1, 7, 100, 1000, 30_000])),
        "quota": draw(st.one_of(st.none(), st.integers(1, 500).map(float), st.floats(0.01, 1e4))),
    }
    if config["quota"] is not None:
        config["upper"] = draw(st.booleans())
    return config


@st.composite
def metrics_sequences(draw: st.DrawFn) -> Sequence:
    """A Sensor of the metrics library: stats with quotas, windows changed under them."""
    stats = []
    for name in draw(st.lists(st.sampled_from(STATS), min_size=1, max_size=4)):
        stats.append({"stat": name, **draw(_stat_config())})
    setup = {"stats": stats, "start_ms": draw(starts)}
    values = st.one_of(
        st.integers(-10, 1000).map(float), st.floats(-1e3, 1e6), st.sampled_from([0.0, 1.0])
    )
    window = max(stats[0]["window_ms"], 1)
    ops: list[list[Any]] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["record"] * 5 + ["advance"] * 4 + ["check", "measure", "config"]))
        if kind == "record":
            ops.append(["srecord", draw(values), draw(st.booleans())])
        elif kind == "advance":
            ops.append(["advance", draw(clock_steps(window, stats[0]["samples"]))])
        elif kind == "check":
            ops.append(["scheck"])
        elif kind == "measure":
            ops.append(["smeasure", draw(st.integers(0, len(stats) - 1))])
        else:
            ops.append(["sconfig", draw(st.integers(0, len(stats) - 1)), draw(_stat_config())])
    ops.extend(["smeasure", index] for index in range(len(stats)))
    return "metrics", setup, ops


@st.composite
def backoff_sequences(draw: st.DrawFn) -> Sequence:
    """ExponentialBackoff without jitter (its deterministic part)."""
    setup = {
        "initial_ms": draw(st.one_of(st.integers(0, 2000), st.sampled_from([1, 50, 100]))),
        "multiplier": draw(st.integers(2, 10)),
        "max_ms": draw(st.one_of(st.integers(0, 200_000), st.sampled_from([1000, 1 << 40]))),
        "jitter": 0.0,
    }
    attempts = st.one_of(st.integers(0, 64), st.integers(0, 1 << 40))
    ops = [["backoff", a] for a in draw(st.lists(attempts, min_size=1, max_size=20))]
    return "backoff", setup, ops
