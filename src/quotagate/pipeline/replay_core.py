"""Replay of one group of usage events through the quota engine, in one process.

This is the gateway's decision sequence (DESIGN.md, spec §5.4 and §6.1) applied to
recorded events: which quota each request is charged to, how throttles combine (max, ties
to the request quota) and, in the closed loop, how a throttle mutes the client. The
arithmetic itself is always ``quotagate.quota``'s.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from quotagate.pipeline import apis
from quotagate.pipeline.quotas import build_managers, parse_quotas
from quotagate.pipeline.sharing import user_name
from quotagate.quota import (
    REQUEST_CAUSE,
    THROTTLING_QUOTA_EXCEEDED,
    choose_throttle,
    nanos_to_percentage,
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
CAUSES: Final = ("", "produce", "fetch", REQUEST_CAUSE, "controller_mutation")
_NONE, _PRODUCE, _FETCH, _REQUEST, _CONTROLLER = range(5)
_CAUSE_INDEX: Final = {cause: index for index, cause in enumerate(CAUSES)}


@dataclass(frozen=True, slots=True)
class Decision:
    throttle_ms: int
    cause: int  # index into CAUSES
    error_code: int


class Replayer:
    """The engine's managers for one candidate configuration, and the per-request rules."""

    def __init__(self, quota_text: str) -> None:
        managers = build_managers(parse_quotas(quota_text))
        self.produce = managers.produce
        self.fetch = managers.fetch
        self.request = managers.request
        self.controller = managers.controller
        # A manager with no quota records nothing (spec §3.6); skipping its calls is
        # only a shortcut, the results are the same.
        self._on = (
            self.produce.quotas_enabled,
            self.fetch.quotas_enabled,
            self.request.quotas_enabled,
            self.controller.quotas_enabled,
        )

    def decide(
        self,
        user: str,
        client_id: str,
        api_key: int,
        api_version: int,
        request_bytes: int,
        response_bytes: int,
        mutations: int,
        thread_time_us: int,
        now_ms: int,
    ) -> Decision:
        produce_on, fetch_on, request_on, controller_on = self._on
        r = 0
        # An acks=0 produce has no response (response_bytes 0) and, as in Kafka, its time
        # goes to the exempt sensor rather than the request quota.
        acks_zero = api_key == apis.PRODUCE and response_bytes == 0
        if request_on and not acks_zero and api_key not in apis.REQUEST_QUOTA_EXEMPT:
            r = self.request.record_and_get_throttle_ms(
                user, client_id, nanos_to_percentage(thread_time_us * 1000), now_ms
            )
        other, other_cause, error = 0, _NONE, 0
        if api_key == apis.PRODUCE:
            if produce_on:
                other = self.produce.record_and_get_throttle_ms(
                    user, client_id, request_bytes, now_ms
                )
            other_cause = _PRODUCE
        elif api_key == apis.FETCH:
            if fetch_on:
                other = self.fetch.record_and_get_throttle_ms(
                    user, client_id, response_bytes, now_ms
                )
                # A throttled fetch is answered empty, so its bytes must not count.
                if max(other, r) > 0:
                    self.fetch.unrecord(user, client_id, response_bytes, now_ms)
            other_cause = _FETCH
        elif mutations > 0 and controller_on and apis.is_mutation(api_key):
            if apis.is_strict_mutation(api_key, api_version):
                other = self.controller.record_and_get_throttle_ms(
                    user, client_id, mutations, now_ms
                )
                error = THROTTLING_QUOTA_EXCEEDED if other > 0 else 0
            else:
                quota = self.controller.new_permissive_quota(user, client_id, now_ms)
                quota.record(mutations, now_ms)
                other = quota.throttle_time(now_ms)
            other_cause = _CONTROLLER
        throttle_ms, cause = choose_throttle(r, ((CAUSES[other_cause], other),))
        return Decision(throttle_ms, _CAUSE_INDEX[cause], error)


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
    users = [user_name(p) for p in ordered["principal"].tolist()]
    clients = ordered["client_id"].tolist()
    units = _mute_units(ordered)
    api_key = ordered["api_key"].to_numpy(np.int64).tolist()
    version = ordered["api_version"].to_numpy(np.int64).tolist()
    req = ordered["request_bytes"].to_numpy(np.int64).tolist()
    resp = ordered["response_bytes"].to_numpy(np.int64).tolist()
    mut = ordered["partition_mutations"].to_numpy(np.int64).tolist()
    thread_us = (
        ordered["gateway_time_us"].to_numpy(np.int64)
        + ordered["upstream_time_us"].to_numpy(np.int64)
    ).tolist()
    at = [0] * n
    throttle = [0] * n
    cause = [0] * n
    error = [0] * n
    mute_end: dict[int, int] = {}
    decide = replayer.decide

    def run(i: int, now: int) -> None:
        d = decide(
            users[i],
            clients[i],
            api_key[i],
            version[i],
            req[i],
            resp[i],
            mut[i],
            thread_us[i],
            now,
        )
        at[i], throttle[i], cause[i], error[i] = now, d.throttle_ms, d.cause, d.error_code
        mute_end[units[i]] = now + d.throttle_ms

    if closed_loop:
        _closed_loop(ts, units, mute_end, run)
        delay = [a - t for a, t in zip(at, ts, strict=True)]
    else:
        delay = [0] * n
        for i in range(n):
            # What the mute would have cost this request, had the client been muted.
            delay[i] = max(0, mute_end.get(units[i], 0) - ts[i])
            run(i, ts[i])
    result = ordered.copy()
    result["replay_ts_ms"] = np.asarray(at, np.int64)
    result["predicted_throttle_ms"] = np.asarray(throttle, np.int32)
    result["predicted_cause"] = [CAUSES[c] for c in cause]
    result["predicted_error_code"] = np.asarray(error, np.int16)
    result["delay_ms"] = np.asarray(delay, np.int64)
    return result


def _mute_units(ordered: pd.DataFrame) -> list[int]:
    """The unit KIP-219 mutes: a connection. Usage events know the client and its peer
    address, the closest thing to a connection they carry."""
    keys = pd.MultiIndex.from_frame(ordered[["principal", "client_id", "client_host"]])
    codes, _ = pd.factorize(keys)
    return [int(c) for c in codes]


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
