"""The stream's cell rows: the latest of each cell, however many batches wrote it, in a
bounded number of directories, and correct wherever a compaction was interrupted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from quotagate.pipeline.rollup import CELL_COLUMNS
from quotagate.pipeline.stream import cells

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def few_loose_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction after 3 loose batches instead of 16: the same rule in a third of the
    Spark writes."""
    monkeypatch.setattr(cells, "COMPACT_AFTER", 3)


SCHEMA = (
    "window_start_ms long, principal string, client_id string, tenant string, api_key int, "
    "api_version int, acks int, follower boolean, validate_only boolean, "
    "throttle_cause string, topic string, requests long"
)
assert all(name in SCHEMA for name in CELL_COLUMNS)


def _batch(spark: SparkSession, changed: dict[str, int]) -> DataFrame:
    """Cell rows of one batch: each changed client's cell with its sum so far."""
    rows = [
        (0, "User:a", client, "", 0, 9, 1, False, False, "", "orders", requests)
        for client, requests in changed.items()
    ]
    return spark.createDataFrame(rows, SCHEMA)


def _current(spark: SparkSession, out: Path) -> dict[str, int]:
    rows = cells.current_cells(spark, out).collect()
    assert len(rows) == len({row.client_id for row in rows}), "one row per cell"
    return {row.client_id: row.requests for row in rows}


def _loose(out: Path) -> list[str]:
    return sorted(path.name for path in (out / cells.CELLS_DIR).glob("batch=*"))


def test_many_batches_leave_the_latest_row_of_each_cell_in_few_directories(
    spark: SparkSession, tmp_path: Path
) -> None:
    expected: dict[str, int] = {}
    # Two compactions (the second replaces the first), and loose batches after them.
    batches = 2 * cells.COMPACT_AFTER + 3
    for batch_id in range(batches):
        # "steady" changes every batch, "early" only in the first, one new cell per batch.
        changed = {"steady": batch_id + 1, f"new-{batch_id}": 1}
        if batch_id == 0:
            changed["early"] = 7
        cells.write_batch(_batch(spark, changed), tmp_path, batch_id)
        cells.compact_if_due(spark, tmp_path, batch_id)
        expected.update(changed)
        assert len(_loose(tmp_path)) <= cells.COMPACT_AFTER + 1
    assert _current(spark, tmp_path) == expected
    compacted = [p.name for p in (tmp_path / cells.COMPACTED_DIR).iterdir()]
    assert compacted == [f"upto={2 * cells.COMPACT_AFTER - 1}"], compacted


def test_an_interrupted_compaction_or_a_rerun_batch_changes_nothing_readers_see(
    spark: SparkSession, tmp_path: Path
) -> None:
    for batch_id in range(cells.COMPACT_AFTER + 2):
        cells.write_batch(_batch(spark, {"c": batch_id}), tmp_path, batch_id)
    kept = tmp_path / "kept"
    shutil.copytree(tmp_path / cells.CELLS_DIR, kept)
    cells.compact_if_due(spark, tmp_path, cells.COMPACT_AFTER + 1)
    assert _loose(tmp_path) == [f"batch={cells.COMPACT_AFTER + 1}"]
    # Killed after the rename, before the covered batches went; and a half-written next one.
    for path in kept.iterdir():
        if not (tmp_path / cells.CELLS_DIR / path.name).exists():
            shutil.copytree(path, tmp_path / cells.CELLS_DIR / path.name)
    (tmp_path / cells.COMPACTED_DIR / "_partial").mkdir()
    assert _current(spark, tmp_path) == {"c": cells.COMPACT_AFTER + 1}
    # The current batch rerun after the crash replaces its own directory only.
    cells.write_batch(_batch(spark, {"c": 99}), tmp_path, cells.COMPACT_AFTER + 1)
    assert _current(spark, tmp_path) == {"c": 99}
