"""Replay of one group of usage events through the quota engine, in one process.

Which quota each request is charged to and how throttles combine are the engine's rules
(``quotagate.quota.request_rules``, the very functions the gateway's quota stages call); this
module only orders the events, feeds them through those rules and, in the closed loop, lets a
throttle mute the client as the gateway would.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from quotagate.pipeline.quotas import parse_quotas
from quotagate.quota import (
    Cause,
    Charging,
    OtherQuota,
    QuotaManagers,
    charge_whole,
    classify,
    principal_user,
)

# A total order on events: time first, then every column that describes the request, so
# that any two runs (Spark groups, a plain loop) see equal-time events in the same order.
ORDER_COLUMNS: Final = [
    "ts_ms",
    "principal",
    "client_id",
    "client_host",
    "api_key",
    "api_version",
    "request_bytes",
    "response_bytes",
    "partition_mutations",
    "gateway_time_us",
    "upstream_time_us",
]
CAUSES: Final = tuple(Cause)


class Replayer:
    """One candidate configuration's managers, charging usage events by the shared rules."""

    def __init__(self, quota_text: str) -> None:
        self.managers = QuotaManagers.from_quota_file(parse_quotas(quota_text))

    def decide(
        self,
        user: str,
        client_id: str,
        api_key: int,
        api_version: int,
        amount: int,
        thread_time_us: int,
        now_ms: int,
        *,
        acks: int | None = None,
        follower: bool = False,
        validate_only: bool = False,
        mutation_counts: Sequence[int] = (),
    ) -> tuple[int, Cause, int]:
        """One request: (throttle ms, cause, error). ``amount`` is what the other quota
        counts: request bytes for a produce, response bytes for a fetch."""
        charging = classify(
            api_key, api_version, acks=acks, follower=follower, validate_only=validate_only
        )
        return charge_whole(
            self.managers,
            charging,
            user,
            client_id,
            api_key,
            api_version,
            thread_time_us * 1000,
            amount,
            mutation_counts,
            now_ms,
        )


def replay_frame(events: pd.DataFrame, quota_text: str, closed_loop: bool) -> pd.DataFrame:
    """Replay ``events`` (one group, any order) and return them with the predictions.

    Added columns: ``replay_ts_ms`` (when the request would be read), ``predicted_throttle_ms``,
    ``predicted_cause``, ``predicted_error_code`` and ``delay_ms`` (how long the request
    waited behind a mute; in the open loop: how long it would have had to wait).
    """
    ordered = events.sort_values(ORDER_COLUMNS, kind="mergesort", ignore_index=True)
    replayer = Replayer(quota_text)
    n = len(ordered)
    ts = ordered["ts_ms"].to_numpy(np.int64).tolist()
    principal_codes, principals = pd.factorize(ordered["principal"])
    user_of = [principal_user(p) for p in principals.tolist()]
    users = [user_of[c] for c in principal_codes.tolist()]
    clients = ordered["client_id"].tolist()
    units = _mute_units(ordered)
    charging, amount = _classify(ordered)
    counts = _mutation_counts(ordered, charging)
    api_keys = ordered["api_key"].to_numpy(np.int64).tolist()
    versions = ordered["api_version"].to_numpy(np.int64).tolist()
    thread_ns = (
        (
            ordered["gateway_time_us"].to_numpy(np.int64)
            + ordered["upstream_time_us"].to_numpy(np.int64)
        )
        * 1000
    ).tolist()
    at = [0] * n
    throttle = [0] * n
    cause = [""] * n
    error = [0] * n
    mute_end: dict[int, int] = {}
    managers = replayer.managers

    def run(i: int, now: int) -> None:
        t, c, e = charge_whole(
            managers,
            charging[i],
            users[i],
            clients[i],
            api_keys[i],
            versions[i],
            thread_ns[i],
            amount[i],
            counts.get(i, ()),
            now,
        )
        at[i], throttle[i], cause[i], error[i] = now, t, c, e
        mute_end[units[i]] = now + t

    if closed_loop:
        _closed_loop(ts, units, mute_end, run)
        delay = [a - t for a, t in zip(at, ts, strict=True)]
    else:
        delay = [0] * n
        get_end = mute_end.get
        for i, (now, unit) in enumerate(zip(ts, units, strict=True)):
            # What the mute would have cost this request, had the client been muted.
            end = get_end(unit, 0)
            if end > now:
                delay[i] = end - now
            run(i, now)
    result = ordered  # sort_values made it: a frame of our own, no copy needed
    result["replay_ts_ms"] = np.asarray(at, np.int64)
    result["predicted_throttle_ms"] = np.asarray(throttle, np.int32)
    result["predicted_cause"] = cause
    result["predicted_error_code"] = np.asarray(error, np.int16)
    result["delay_ms"] = np.asarray(delay, np.int64)
    return result


def _classify(ordered: pd.DataFrame) -> tuple[list[Charging], list[int]]:
    """The shared rules' charging per event, computed once per distinct kind of request,
    and the amount each event's byte quota counts."""
    api_key = ordered["api_key"].to_numpy(np.int64)
    version = ordered["api_version"].to_numpy(np.int64)
    # acks is null for everything but Produce; -2 stands for "no acks" in the kind key.
    acks = _fact(ordered, "acks", "Int64", -2).to_numpy(np.int64)
    follower = _fact(ordered, "follower", "boolean", False).to_numpy(bool)
    validate = _fact(ordered, "validate_only", "boolean", False).to_numpy(bool)
    kind = (((api_key * 65_536 + version) * 8 + acks + 2) * 2 + follower) * 2 + validate
    inverse, _ = pd.factorize(kind)
    _, first = np.unique(inverse, return_index=True)
    table = [
        classify(
            int(api_key[i]),
            int(version[i]),
            acks=None if acks[i] == -2 else int(acks[i]),
            follower=bool(follower[i]),
            validate_only=bool(validate[i]),
        )
        for i in first.tolist()
    ]
    charging = [table[k] for k in inverse.tolist()]
    other = np.array([int(table[k].other) for k in range(len(table))], np.int64)[inverse]
    amount = np.select(
        [other == OtherQuota.PRODUCE, other == OtherQuota.FETCH],
        [ordered["request_bytes"].to_numpy(np.int64), ordered["response_bytes"].to_numpy(np.int64)],
        0,
    )
    return charging, amount.tolist()


def _fact(ordered: pd.DataFrame, column: str, dtype: str, missing: object) -> Any:
    """A request fact column with its nulls filled; frames from before the column existed
    (or hand-built ones) have none, which reads as all missing."""
    if column not in ordered.columns:
        return pd.array([missing] * len(ordered), dtype=dtype)
    return pd.array(ordered[column], dtype=dtype).fillna(missing)


def _mutation_counts(ordered: pd.DataFrame, charging: list[Charging]) -> dict[int, list[int]]:
    """Per-topic partition mutations of each mutation event, in request order.

    The gateway records them in ``topics``; events ingested from a broker's log carry only
    the total, which is then charged as one topic.
    """
    mutating = (OtherQuota.STRICT_MUTATION, OtherQuota.PERMISSIVE_MUTATION)
    rows = [i for i, c in enumerate(charging) if c.other in mutating]
    if not rows:
        return {}
    if "topics" not in ordered.columns:
        return {i: [int(ordered["partition_mutations"].iat[i])] for i in rows}
    topics = ordered["topics"]
    totals = ordered["partition_mutations"]
    counts: dict[int, list[int]] = {}
    for i in rows:
        listed = topics.iat[i]
        if listed is not None and len(listed) > 0:
            counts[i] = [int(entry["bytes"]) for entry in listed]
        else:
            counts[i] = [int(totals.iat[i])]
    return counts


def _mute_units(ordered: pd.DataFrame) -> list[int]:
    """The unit KIP-219 mutes: a connection. Usage events know the client and its peer
    address, the closest thing to a connection they carry."""
    unit = np.zeros(len(ordered), np.int64)
    for column in ("principal", "client_id", "client_host"):
        codes, uniques = pd.factorize(ordered[column])
        unit, _ = pd.factorize(unit * len(uniques) + codes)
    return [int(u) for u in unit.tolist()]


def _closed_loop(
    ts: list[int], units: list[int], mute_end: dict[int, int], run: Callable[[int, int], None]
) -> None:
    """Discrete-event replay: a unit's next request is read no earlier than it was
    recorded, than its previous request, and than the end of the unit's mute."""
    queues: dict[int, list[int]] = {}
    for i, unit in enumerate(units):
        queues.setdefault(unit, []).append(i)
    position = dict.fromkeys(queues, 0)
    ready: list[tuple[int, int, int]] = [(ts[q[0]], q[0], u) for u, q in queues.items()]
    heapq.heapify(ready)
    while ready:
        now, i, unit = heapq.heappop(ready)
        run(i, now)
        position[unit] += 1
        queue = queues[unit]
        if position[unit] < len(queue):
            j = queue[position[unit]]
            heapq.heappush(ready, (max(ts[j], now, mute_end[unit]), j, unit))
