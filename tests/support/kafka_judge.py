"""Kafka's own quota classes as the judge of the engine (issue 32).

A *sequence* is a kind, a setup and a list of operations (``[name, args...]``, JSON-ready).
``KafkaJudge.run`` sends it to ``java/differential/Harness.java``, which plays it on Kafka
4.3.1's classes over ``MockTime``; ``run_engine`` plays it on ``quotagate.quota``. Both
answer one result per operation in one encoding (doubles as their IEEE-754 bits, NaN
canonical), so a sequence agrees when the two lists are equal. ``first_difference`` says
where they part.

Kinds and operations (the harness's comments say what each calls in Kafka):

* ``client`` (setup ``type`` produce|fetch, ``samples``, ``window_s``, ``start_ms``),
  ``request`` and ``controller``: ``advance``, ``update`` (user, client: a name, ``"<default>"``
  or None; value or None), ``record``, ``record_no_throttle``, ``unrecord``, ``enabled``,
  ``quota``, ``max_value``, ``throttle`` (user, client, ms, channel id), ``reap``,
  ``queue_size``, ``measure`` (the sharing key and its metrics' values), ``expire``;
  ``request`` adds ``record_nanos``, ``record_network``, ``exempt``, ``measure_exempt``;
  ``controller`` adds ``new_quota`` (handle, strict|permissive, user, client), ``qrecord``,
  ``qthrottle``, ``qexceeded``, ``record_mutation``.
* ``metrics`` (setup ``stats``: stat, samples, window_ms, quota, upper): ``advance``,
  ``srecord`` (value, check quotas), ``scheck``, ``smeasure`` (index), ``sconfig`` (index,
  config).
* ``backoff`` (setup ``initial_ms``, ``multiplier``, ``max_ms``, ``jitter``): ``backoff``.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import tempfile
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final

import harness

from quotagate.quota import DEFAULT, ClientQuotaManager, EntityName
from quotagate.quota.backoff import ExponentialBackoff
from quotagate.quota.controller_mutation import (
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from quotagate.quota.cumulative_sum import CumulativeSum
from quotagate.quota.java import DOUBLE_MAX, INT_MAX, INT_MIN
from quotagate.quota.metric_config import MetricConfig, Quota
from quotagate.quota.rate import Rate, SimpleRate
from quotagate.quota.request_quota_manager import RequestQuotaManager
from quotagate.quota.sampled_stat import Avg, Max, Min, WindowedCount, WindowedSum
from quotagate.quota.sensor import Metric, QuotaViolation, Sensor
from quotagate.quota.stat import Stat
from quotagate.quota.token_bucket import TokenBucket

Op = list[Any]
DEFAULT_NAME: Final = "<default>"
START_MS: Final = 1_700_000_000_000
_NAN_BITS: Final = 0x7FF8000000000000


def bits(value: float) -> int:
    """A double as Java's ``Double.doubleToLongBits`` gives it (one NaN)."""
    if math.isnan(value):
        return _NAN_BITS
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def from_bits(value: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", value))[0])


class JudgeError(RuntimeError):
    """The harness failed on a sequence (a Java exception: a bad sequence or a harness bug)."""


class KafkaJudge:
    """One long-lived JVM running the harness; ``run`` plays one sequence on it."""

    def __init__(self) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._process = subprocess.Popen(
            harness.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self._lock = threading.Lock()
        self.sequences = 0

    def run(self, kind: str, setup: dict[str, Any], ops: list[Op]) -> list[Any]:
        line = json.dumps({"kind": kind, "setup": setup, "ops": ops}, separators=(",", ":"))
        with self._lock:
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()
            answer_line = self._process.stdout.readline()
        if not answer_line:
            self._stderr.seek(0)
            raise JudgeError(f"the harness died: {self._stderr.read().decode(errors='replace')}")
        answer = json.loads(answer_line)
        if "error" in answer:
            raise JudgeError(f"op {answer['at']} of {line}: {answer['error']}")
        self.sequences += 1
        results: list[Any] = answer["results"]
        return results

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stderr.close()


# -- the engine side -----------------------------------------------------------------------


def _entity(name: str | None) -> EntityName:
    if name is None:
        return None
    return DEFAULT if name == DEFAULT_NAME else name


def _config(stat: dict[str, Any]) -> MetricConfig:
    quota = stat.get("quota")
    return MetricConfig(
        samples=stat.get("samples", 2),
        time_window_ms=stat.get("window_ms", 30_000),
        quota=None if quota is None else Quota(float(quota), stat.get("upper", True)),
    )


_STATS: Final[dict[str, type[Stat]]] = {
    "rate": Rate,
    "simple_rate": SimpleRate,
    "token_bucket": TokenBucket,
    "avg": Avg,
    "max": Max,
    "min": Min,
    "windowed_sum": WindowedSum,
    "windowed_count": WindowedCount,
    "cumulative_sum": CumulativeSum,
}


class _EngineRun:
    def __init__(self, kind: str, setup: dict[str, Any]) -> None:
        self.kind = kind
        self.now = int(setup.get("start_ms", START_MS))
        samples, window_s = setup.get("samples", 11), setup.get("window_s", 1)
        self.manager: ClientQuotaManager | None = None
        self.metric_names: tuple[str, ...] = ()
        if kind == "client":
            self.manager = ClientQuotaManager(setup["type"], samples, window_s)
            self.metric_names = (self.manager.quota_type.metric_name, "throttle-time")
        elif kind == "request":
            self.manager = RequestQuotaManager(samples, window_s)
            self.metric_names = ("request-time", "throttle-time")
        elif kind == "controller":
            self.manager = ControllerMutationQuotaManager(samples, window_s)
            self.metric_names = ("tokens", "mutation-rate", "throttle-time")
        elif kind == "metrics":
            self.sensor = Sensor("s", self.now)
            self.metrics: list[Metric] = [
                self.sensor.add(f"m{index}", _STATS[stat["stat"]](), _config(stat))
                for index, stat in enumerate(setup["stats"])
            ]
        elif kind == "backoff":
            self.backoff = ExponentialBackoff(
                setup["initial_ms"], setup["multiplier"], setup["max_ms"], setup["jitter"]
            )
        else:
            raise ValueError(f"unknown kind {kind}")
        self.quotas: dict[int, ControllerMutationQuota] = {}

    @property
    def request(self) -> RequestQuotaManager:
        assert isinstance(self.manager, RequestQuotaManager)
        return self.manager

    @property
    def controller(self) -> ControllerMutationQuotaManager:
        assert isinstance(self.manager, ControllerMutationQuotaManager)
        return self.manager

    def apply(self, op: Op) -> Any:
        name, args = op[0], op[1:]
        manager = self.manager
        now = self.now
        if name == "advance":
            self.now += args[0]
            return None
        if manager is not None:
            if name == "update":
                manager.update_quota(_entity(args[0]), _entity(args[1]), args[2])
                return None
            if name == "record":
                return manager.record_and_get_throttle_ms(args[0], args[1], args[2], now)
            if name == "record_no_throttle":
                manager.record_no_throttle(args[0], args[1], args[2], now)
                return None
            if name == "unrecord":
                manager.unrecord(args[0], args[1], args[2], now)
                return None
            if name == "enabled":
                return manager.quotas_enabled
            if name == "quota":
                return bits(manager.quota_limit(args[0], args[1]))
            if name == "max_value":
                return bits(manager.max_value_in_quota_window(args[0], args[1], now))
            if name == "throttle":
                channel: Hashable = args[3]
                manager.throttle(args[0], args[1], channel, args[2], now)
                return None
            if name == "reap":
                return sorted(manager.due_channels(now))
            if name == "queue_size":
                return bits(float(manager.throttled_channels.queue_size))
            if name == "measure":
                return self._measure(manager, args[0], args[1])
            if name == "expire":
                manager.expire_sensors(now)
                return self._live_metrics(manager)
        if name == "record_nanos":
            return self.request.record_nanos_and_get_throttle_ms(args[0], args[1], args[2], now)
        if name == "record_network":
            self.request.record_nanos_no_throttle(args[0], args[1], args[2], now)
            return None
        if name == "exempt":
            self.request.record_exempt(args[0], now)
            return None
        if name == "measure_exempt":
            return bits(self.request.exempt_sensor.metrics[0].measure(now))
        if name == "new_quota":
            handle, mode, user, client = args
            make = (
                self.controller.new_strict_quota
                if mode == "strict"
                else self.controller.new_permissive_quota
            )
            self.quotas[handle] = make(user, client, now)
            return None
        if name == "qrecord":
            try:
                self.quotas[args[0]].record(args[1], now)
            except ThrottlingQuotaExceeded as error:
                return [error.error_code, error.throttle_ms]
            return None
        if name == "qthrottle":
            return _throttle_left(self.quotas[args[0]], now)
        if name == "qexceeded":
            return self.quotas[args[0]].is_exceeded
        if name == "record_mutation":
            return self.controller.record_and_get_throttle_ms(args[0], args[1], args[2], now)
        if name in ("srecord", "scheck"):
            try:
                if name == "srecord":
                    self.sensor.record(args[0], now, check_quotas=args[1])
                else:
                    self.sensor.check_quotas(now)
            except QuotaViolation as violation:
                index = next(i for i, m in enumerate(self.metrics) if m is violation.metric)
                return [index, bits(violation.value), bits(violation.bound)]
            return None
        if name == "smeasure":
            return bits(self.metrics[args[0]].measure(now))
        if name == "sconfig":
            self.metrics[args[0]].config = _config(args[1])
            return None
        if name == "backoff":
            return self.backoff.backoff(args[0])
        raise ValueError(f"unknown op {name} for kind {self.kind}")

    def _measure(self, manager: ClientQuotaManager, user: str, client: str) -> list[Any]:
        key = manager.sharing_key(user, client)
        quota_sensor = manager.quota_sensors().get(key)
        throttle_sensor = manager._throttle_sensors.get(key)
        values: list[Any] = [key[0], key[1]]
        for name in self.metric_names:
            sensor = throttle_sensor if name == "throttle-time" else quota_sensor
            values.append(None if sensor is None else bits(sensor.metric(name).measure(self.now)))
        return values

    def _live_metrics(self, manager: ClientQuotaManager) -> list[str]:
        names = [
            f"{metric.name}|{key[0]}|{key[1]}"
            for sensors in (manager.quota_sensors(), manager._throttle_sensors)
            for key, sensor in sensors.items()
            for metric in sensor.metrics
        ]
        return sorted(names)


def run_engine(kind: str, setup: dict[str, Any], ops: list[Op]) -> list[Any]:
    """Play a sequence on ``quotagate.quota``: one result per op, as the harness answers."""
    run = _EngineRun(kind, setup)
    return [run.apply(op) for op in ops]


@dataclass(frozen=True)
class NarrowedThrottle:
    """A controller quota's ``throttleTime()`` whose remaining throttle, ``last throttle -
    (now - last recorded)``, is below the int range (asked more than 2³¹ ms, 24.8 days,
    after the violation): Kafka narrows it with ``(int)`` before ``Math.max(0, …)``, so its
    answer is that max of the wrapped value; the engine's, saturated, is 0."""

    engine: int
    kafka: int


def _throttle_left(quota: Any, now_ms: int) -> int | NarrowedThrottle:
    value: int = quota.throttle_time(now_ms)
    last = getattr(quota, "_last_throttle_ms", 0)
    left = last - (now_ms - getattr(quota, "_last_recorded_ms", 0))
    if last == 0 or left >= INT_MIN:
        return value
    wrapped = (left + (1 << 31)) % (1 << 32) - (1 << 31)
    return NarrowedThrottle(value, max(0, wrapped))


def describe(result: Any) -> str:
    """A result with its doubles shown as numbers (for failure messages)."""
    if isinstance(result, bool) or result is None or isinstance(result, str):
        return repr(result)
    if isinstance(result, int) and abs(result) > 1 << 53:
        return f"{result} (double {from_bits(result)!r})"
    if isinstance(result, list):
        return "[" + ", ".join(describe(r) for r in result) + "]"
    return repr(result)


def narrowed(kafka: Any, engine: Any) -> bool:
    """The documented difference "throttle narrowing" (docs/engine.md): a throttle past the
    int range, which Kafka wraps around (``(int)`` of a long) and the engine saturates at
    ±2³¹, agrees whatever Kafka's wrapped value. Only throttles (ints) and the throttle of a
    refusal (``[89, ms]``) can be narrowed; a saturated value means the true one was past
    the range (no state keeps the narrowed value: the next results are compared as ever).
    A controller quota's throttle asked past the range (:class:`NarrowedThrottle`) agrees
    when Kafka's answer is exactly the wrap of the engine's own remaining throttle."""
    if isinstance(engine, NarrowedThrottle):
        return engine.engine == 0 and kafka == engine.kafka
    if isinstance(engine, list) and isinstance(kafka, list) and len(engine) == len(kafka) == 2:
        return engine[0] == kafka[0] and narrowed(kafka[1], engine[1])
    return type(engine) is int and type(kafka) is int and engine in (INT_MAX, INT_MIN)


def pow_ulp_at_cap(setup: dict[str, Any], kafka: Any, engine: Any) -> bool:
    """The documented difference "backoff at its cap" (docs/engine.md): where the exponent
    saturates, the un-jittered term ``initial * multiplier ** exp_max`` is the cap up to one
    ulp either way, by the libm at hand (HotSpot's ``Math.pow`` intrinsic, fdlibm's
    ``StrictMath.pow`` and glibc's ``pow`` each round their own way), and the truncation
    makes it the cap or the cap - 1. Both answers there agree."""
    cap = setup["max_ms"]
    return {kafka, engine} == {cap, cap - 1}


def first_difference(
    kind: str, setup: dict[str, Any], ops: list[Op], kafka: list[Any], engine: list[Any]
) -> str | None:
    """None when the two agree, else a report of the first op where they differ."""
    for index, (op, theirs, ours) in enumerate(zip(ops, kafka, engine, strict=True)):
        if (
            theirs != ours
            and not narrowed(theirs, ours)
            and not (kind == "backoff" and pow_ulp_at_cap(setup, theirs, ours))
        ):
            return (
                f"{kind} {json.dumps(setup)}: op {index} {json.dumps(op)}\n"
                f"  Kafka:     {describe(theirs)}\n  quotagate: {describe(ours)}\n"
                f"  sequence:  {json.dumps(ops[: index + 1])}"
            )
    return None


__all__ = [
    "DEFAULT_NAME",
    "DOUBLE_MAX",
    "START_MS",
    "JudgeError",
    "KafkaJudge",
    "NarrowedThrottle",
    "bits",
    "first_difference",
    "from_bits",
    "run_engine",
]
