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
_CAUSE_INDEX: Final = {cause: index for index, cause in enumerate(CAUSES)}
# The quota a request is charged to besides the request quota (``Replayer.classify``).
_NO_OTHER, _PRODUCE, _FETCH, _STRICT, _PERMISSIVE = range(5)
_OTHER_CAUSE: Final = ("", "produce", "fetch", "controller_mutation", "controller_mutation")


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
        self._request_on = self.request.quotas_enabled
        self._other_on = {
            _PRODUCE: self.produce.quotas_enabled,
            _FETCH: self.fetch.quotas_enabled,
            _STRICT: self.controller.quotas_enabled,
            _PERMISSIVE: self.controller.quotas_enabled,
        }

    def classify(
        self, api_key: int, api_version: int, response_bytes: int, mutations: int
    ) -> tuple[bool, int]:
        """Whether a request is charged to the request quota, and to which other quota.

        Depends on nothing but the request's header and sizes, so a frame of events can
        be classified once per distinct combination (``replay_frame``).
        """
        # An acks=0 produce has no response (response_bytes 0) and, as in Kafka, its time
        # goes to the exempt sensor rather than the request quota.
        acks_zero = api_key == apis.PRODUCE and response_bytes == 0
        request = self._request_on and not acks_zero and api_key not in apis.REQUEST_QUOTA_EXEMPT
        if api_key == apis.PRODUCE:
            other = _PRODUCE
        elif api_key == apis.FETCH:
            other = _FETCH
        elif mutations > 0 and apis.is_mutation(api_key):
            other = _STRICT if apis.is_strict_mutation(api_key, api_version) else _PERMISSIVE
        else:
            other = _NO_OTHER
        return request, other if self._other_on.get(other, False) else _NO_OTHER

    def charge(
        self,
        user: str,
        client_id: str,
        request: bool,
        thread_time_us: int,
        other: int,
        amount: int,
        now_ms: int,
    ) -> tuple[int, str, int]:
        """Record one request (as ``classify`` says) and return (throttle ms, cause, error).

        ``amount`` is what the other quota counts: request bytes for a produce, response
        bytes for a fetch, partition mutations for a mutation.
        """
        r = (
            self.request.record_and_get_throttle_ms(
                user, client_id, nanos_to_percentage(thread_time_us * 1000), now_ms
            )
            if request
            else 0
        )
        if other == _NO_OTHER:
            throttle_ms, cause = choose_throttle(r, ())
            return throttle_ms, cause, 0
        error = 0
        if other == _PRODUCE:
            throttle = self.produce.record_and_get_throttle_ms(user, client_id, amount, now_ms)
        elif other == _FETCH:
            throttle = self.fetch.record_and_get_throttle_ms(user, client_id, amount, now_ms)
            # A throttled fetch is answered empty, so its bytes must not count.
            if throttle > 0 or r > 0:
                self.fetch.unrecord(user, client_id, amount, now_ms)
        elif other == _STRICT:
            throttle = self.controller.record_and_get_throttle_ms(user, client_id, amount, now_ms)
            error = THROTTLING_QUOTA_EXCEEDED if throttle > 0 else 0
        else:
            quota = self.controller.new_permissive_quota(user, client_id, now_ms)
            quota.record(amount, now_ms)
            throttle = quota.throttle_time(now_ms)
        throttle_ms, cause = choose_throttle(r, ((_OTHER_CAUSE[other], throttle),))
        return throttle_ms, cause, error

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
        """One request, classified and charged."""
        request, other = self.classify(api_key, api_version, response_bytes, mutations)
        amount = {_PRODUCE: request_bytes, _FETCH: response_bytes}.get(other, mutations)
        throttle_ms, cause, error = self.charge(
            user, client_id, request, thread_time_us, other, amount, now_ms
        )
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
    principal_codes, principals = pd.factorize(ordered["principal"])
    user_of = [user_name(p) for p in principals.tolist()]
    users = [user_of[c] for c in principal_codes.tolist()]
    clients = ordered["client_id"].tolist()
    units = _mute_units(ordered)
    request, other, amount = _classify(ordered, replayer)
    thread_us = (
        ordered["gateway_time_us"].to_numpy(np.int64)
        + ordered["upstream_time_us"].to_numpy(np.int64)
    ).tolist()
    at = [0] * n
    throttle = [0] * n
    cause = [""] * n
    error = [0] * n
    mute_end: dict[int, int] = {}
    charge = replayer.charge

    def run(i: int, now: int) -> None:
        t, c, e = charge(users[i], clients[i], request[i], thread_us[i], other[i], amount[i], now)
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


def _classify(ordered: pd.DataFrame, replayer: Replayer) -> tuple[list[bool], list[int], list[int]]:
    """``Replayer.classify`` per event, called once per distinct combination, and the
    amount each event's other quota counts."""
    api_key = ordered["api_key"].to_numpy(np.int64)
    version = ordered["api_version"].to_numpy(np.int64)
    req = ordered["request_bytes"].to_numpy(np.int64)
    resp = ordered["response_bytes"].to_numpy(np.int64)
    mut = ordered["partition_mutations"].to_numpy(np.int64)
    # One integer per distinct (api key, version, has a response, mutates).
    combined = ((api_key * 65_536 + version) * 2 + (resp == 0)) * 2 + (mut > 0)
    inverse, _ = pd.factorize(combined)
    _, first = np.unique(inverse, return_index=True)
    table = [
        replayer.classify(int(api_key[i]), int(version[i]), int(resp[i]), int(mut[i]))
        for i in first.tolist()
    ]
    request = np.array([r for r, _ in table], dtype=bool)[inverse]
    other = np.array([o for _, o in table], dtype=np.int64)[inverse]
    amount = np.select([other == _PRODUCE, other == _FETCH, other >= _STRICT], [req, resp, mut], 0)
    return request.tolist(), other.tolist(), amount.tolist()


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
