"""The few Java behaviours Kafka's arithmetic and messages depend on."""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Iterable
from typing import Final

LONG_MAX: Final = 9223372036854775807
# "No quota configured" inside Kafka's managers: Long.MAX_VALUE widened to a double.
UNBOUNDED: Final = float(LONG_MAX)
DOUBLE_MAX: Final = sys.float_info.max
INT_MAX: Final = 2147483647
INT_MIN: Final = -2147483648


def java_round(x: float) -> int:
    """``Math.round(double)``: half-way cases go up, never to even as Python's round does."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return LONG_MAX if x > 0 else -LONG_MAX - 1
    return math.floor(x + 0.5)


def java_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Java's ``/`` on longs."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def to_int32(x: int) -> int:
    """Clamp a long to the int range.

    Kafka narrows throttle times with Scala's ``Long.toInt``, which wraps around; no real
    throttle gets near 2^31 ms (24 days), so we saturate instead of reproducing garbage.
    """
    return max(INT_MIN, min(INT_MAX, x))


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: 31-based over UTF-16 code units, as a 32-bit int."""
    encoded = text.encode("utf-16-be")
    value = 0
    for unit in struct.unpack(f">{len(encoded) // 2}H", encoded):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value


def java_map_text(pairs: Iterable[tuple[str, str | None]]) -> str:
    """How ``HashMap.toString()`` prints a small map of strings: ``{k=v, k2=null}`` in bucket
    order (16 buckets, the spread hash ``h ^ h >>> 16``), insertion order within a bucket.
    Kafka's error messages print quota entities this way, and clients show them to people."""
    items = list(dict(pairs).items())
    order = sorted(
        range(len(items)),
        key=lambda i: ((h := java_string_hash(items[i][0])) ^ (h >> 16)) & 15,
    )
    shown = [(items[i][0], "null" if items[i][1] is None else items[i][1]) for i in order]
    return "{" + ", ".join(f"{key}={value}" for key, value in shown) + "}"
