"""Which lines that are not events the ingest report shows, and how many it counts.

One rule, kept where a task's Python worker and Spark SQL both apply it: a line falls in the
hash bucket ``crc32(its UTF-8 bytes) mod SAMPLE_BUCKETS``, and each (status, bucket) shows its
least (line, reason). Least, because the least of the leasts is the least: tasks fold their
own lines to one row per bucket and the job folds the tasks' rows the same way, whatever way
the lines were split. The report keeps ``SAMPLES`` of them per status.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import Column

SAMPLES: Final = 20
SAMPLE_BUCKETS: Final = 2 * SAMPLES


def bucket_of(line: str) -> int:
    return zlib.crc32(line.encode("utf-8")) % SAMPLE_BUCKETS


def spark_bucket(line: Column) -> Column:
    """:func:`bucket_of`, as a Spark SQL expression (Spark's ``crc32`` is zlib's)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    return F.pmod(F.crc32(line.cast("binary")), F.lit(SAMPLE_BUCKETS))


class BucketFold:
    """A task's lines that are not events, folded to a count and a least line per
    (status, bucket): at most 2 x ``SAMPLE_BUCKETS`` rows, however many lines."""

    __slots__ = ("_counts", "_least")

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], int] = {}
        self._least: dict[tuple[str, int], tuple[str, str | None]] = {}

    def add(self, rest: pa.Table) -> None:
        """Lines with their ``status``, ``reason`` and ``line`` (``ingest.arrow.REST_SCHEMA``)."""
        columns = (rest.column(name).to_pylist() for name in ("status", "reason", "line"))
        self._fold(zip(*columns, strict=True))

    def _fold(self, rows: Iterable[tuple[str, str | None, str]]) -> None:
        counts, least = self._counts, self._least
        for status, reason, line in rows:
            key = (status, bucket_of(line))
            counts[key] = counts.get(key, 0) + 1
            held = least.get(key)
            if held is None or line < held[0]:  # one line, one parse: one reason
                least[key] = (line, reason)

    def rows(self) -> dict[str, list[object]]:
        """Columns ``status``, ``reason``, ``line``, ``lines`` and ``bucket``, one row per
        (status, bucket) seen."""
        keys = sorted(self._counts)
        return {
            "status": [status for status, _ in keys],
            "reason": [self._least[key][1] for key in keys],
            "line": [self._least[key][0] for key in keys],
            "lines": [self._counts[key] for key in keys],
            "bucket": [bucket for _, bucket in keys],
        }
