"""The cell rows a stream's micro-batches wrote, kept to a bounded number of directories.

A micro-batch in update mode writes every cell row an event changed, whole (its sums so far),
to ``cells/batch=N/``; the current value of a cell is the row of the latest batch that wrote
it. Left alone, a job with a 10 s trigger would leave 8 640 directories a day, every one read
again by every batch. So once more than :data:`COMPACT_AFTER` batches are loose, the latest
row of every cell from the batches before the current one is written once to
``compacted/upto=M/`` (M the last batch it covers) and the directories it covers go.

Crash safety: a batch rerun after a crash overwrites only its own directory, which no
compaction has covered (only batches before the current one are compacted). A compaction is
written under a hidden name and renamed into place whole; until the rename, readers use the
previous one and the loose directories, and after it they ignore every directory it covers,
so a compaction interrupted anywhere leaves readers a complete, correct view; leftovers go at
the next compaction.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812

from quotagate.pipeline.rollup import CELL_COLUMNS

CELLS_DIR: Final = "cells"
COMPACTED_DIR: Final = "compacted"
COMPACT_AFTER: Final = 16
"""Loose batch directories tolerated before they are compacted."""

_BATCH: Final = "batch"
_UPTO: Final = "upto="
_PARTIAL: Final = "_partial"


def write_batch(batch: DataFrame, out: Path, batch_id: int) -> None:
    """Batch ``batch_id``'s cell rows, overwritten whole: a rerun replaces its first attempt."""
    batch.write.mode("overwrite").parquet(str(out / CELLS_DIR / f"{_BATCH}={batch_id}"))


def current_cells(spark: SparkSession, out: Path) -> DataFrame:
    """Each cell row as the latest batch wrote it."""
    return latest_rows(_written(spark, out))


def compact_if_due(spark: SparkSession, out: Path, batch_id: int) -> None:
    """Fold the batches before ``batch_id`` into one compacted directory once more than
    :data:`COMPACT_AFTER` of them are loose."""
    upto = batch_id - 1
    if len(_loose(out, _compacted_upto(out))) <= COMPACT_AFTER or upto < 0:
        return
    compacted = out / COMPACTED_DIR
    partial = compacted / _PARTIAL
    shutil.rmtree(partial, ignore_errors=True)
    rows = latest_rows(_written(spark, out).where(F.col(_BATCH) <= upto))
    rows.withColumn(_BATCH, F.lit(upto)).write.parquet(str(partial))
    partial.rename(compacted / f"{_UPTO}{upto}")
    _remove_covered(out, upto)


def latest_rows(written: DataFrame) -> DataFrame:
    """Each cell row as the latest batch wrote it: a batch in update mode writes a cell row
    whole (its sums so far) whenever an event changed it."""
    latest = Window.partitionBy("window_start_ms", *CELL_COLUMNS, "topic").orderBy(
        F.col(_BATCH).desc()
    )
    return (
        written.withColumn("_rank", F.row_number().over(latest))
        .where(F.col("_rank") == 1)
        .drop("_rank", _BATCH)
    )


def _written(spark: SparkSession, out: Path) -> DataFrame:
    """Every row still current: the newest compaction's, then the loose batches after it."""
    upto = _compacted_upto(out)
    loose = [str(path) for path in _loose(out, upto)]
    frames = []
    if upto is not None:
        frames.append(spark.read.parquet(str(out / COMPACTED_DIR / f"{_UPTO}{upto}")))
    if loose:
        frames.append(spark.read.option("basePath", str(out / CELLS_DIR)).parquet(*loose))
    if not frames:
        raise FileNotFoundError(f"no cell rows under {out}")
    written = [frame.withColumn(_BATCH, F.col(_BATCH).cast("long")) for frame in frames]
    return written[0] if len(written) == 1 else written[0].unionByName(written[1])


def _numbered(directory: Path, prefix: str) -> list[tuple[int, Path]]:
    """The ``PREFIXN`` directories under ``directory``, with their N, in order of N (hidden
    and half-written ones, and anything else, left out)."""
    found = []
    for path in directory.glob(f"{prefix}*"):
        number = path.name.removeprefix(prefix)
        if number.isdigit():
            found.append((int(number), path))
    return sorted(found)


def _compacted_upto(out: Path) -> int | None:
    """The last batch the newest compaction covers, None before the first."""
    return max((n for n, _ in _numbered(out / COMPACTED_DIR, _UPTO)), default=None)


def _loose(out: Path, upto: int | None) -> list[Path]:
    """The batch directories no compaction covers, in batch order."""
    return [p for n, p in _numbered(out / CELLS_DIR, f"{_BATCH}=") if upto is None or n > upto]


def _remove_covered(out: Path, upto: int) -> None:
    """The batch directories and older compactions the one up to ``upto`` replaces."""
    covered = [p for n, p in _numbered(out / CELLS_DIR, f"{_BATCH}=") if n <= upto]
    older = [p for n, p in _numbered(out / COMPACTED_DIR, _UPTO) if n < upto]
    for path in [*covered, *older]:
        shutil.rmtree(path, ignore_errors=True)
