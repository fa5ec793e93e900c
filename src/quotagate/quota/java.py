"""The few Java behaviours Kafka's arithmetic and messages depend on."""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Iterable, Sequence
from typing import Final, TypeVar

K = TypeVar("K", bound=str | None)
V = TypeVar("V")

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


def java_max(a: float, b: float) -> float:
    """``Math.max(double, double)``: NaN if either is, and +0.0 above -0.0 (Python's ``max``
    keeps whichever came first of two equal zeros)."""
    if a != a:  # noqa: PLR0124 - NaN
        return a
    if b != b:  # noqa: PLR0124 - NaN
        return b
    if a == 0.0 and b == 0.0:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a >= b else b


def java_min(a: float, b: float) -> float:
    """``Math.min(double, double)``: NaN if either is, and -0.0 below +0.0."""
    if a != a:  # noqa: PLR0124 - NaN
        return a
    if b != b:  # noqa: PLR0124 - NaN
        return b
    if a == 0.0 and b == 0.0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a <= b else b


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


def java_hash_map_order(hashes: Sequence[int], initial_capacity: int | None = None) -> list[int]:
    """The order a ``HashMap`` iterates its keys, given their ``hashCode()`` in first-put order:
    as indices into ``hashes``.

    Buckets in ascending index (the spread hash ``h ^ h >>> 16`` masked by the table size),
    insertion order within a bucket. The table size is what Java's sizing gives:
    ``new HashMap<>(n)`` starts at the power of two >= n (``new HashMap<>()`` at 16) and doubles
    while the map holds more than 3/4 of it, so a small map's order depends on how it was made.
    """
    start = 16 if initial_capacity is None else max(initial_capacity, 1)
    capacity = 1 << (start - 1).bit_length()
    while len(hashes) > int(capacity * 0.75):
        capacity *= 2
    mask = capacity - 1
    return sorted(range(len(hashes)), key=lambda i: (hashes[i] ^ (hashes[i] >> 16)) & mask)


def java_map_items(
    pairs: Iterable[tuple[K, V]], initial_capacity: int | None = None
) -> list[tuple[K, V]]:
    """A map with string keys built by ``put`` in this order (a key put twice keeps its place
    and its last value), as a ``HashMap`` of that initial capacity iterates it (a null key
    hashes to 0)."""
    items = list(dict(pairs).items())
    hashes = [0 if key is None else java_string_hash(key) for key, _ in items]
    order = java_hash_map_order(hashes, initial_capacity)
    return [items[i] for i in order]


def java_map_text(
    pairs: Iterable[tuple[str, str | None]], initial_capacity: int | None = None
) -> str:
    """How ``HashMap.toString()`` prints a map of strings: ``{k=v, k2=null}`` in iteration order.
    Kafka's error messages print quota entities this way, and clients show them to people."""
    shown = java_map_items(pairs, initial_capacity)
    return "{" + ", ".join(f"{k}={'null' if v is None else v}" for k, v in shown) + "}"
