"""Rich progress for Spark stages: a bar fed by Spark's own task counts.

Spark's console progress bar fights with rich and is off in our session; instead a
background thread polls the status tracker and shows completed/total tasks of the
running jobs under the stage's description.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_POLL_S = 0.5


@contextmanager
def spark_progress(
    spark: SparkSession, description: str, *, console: Console | None = None, enabled: bool = True
) -> Iterator[None]:
    """Show a progress bar for everything Spark runs inside the block."""
    if not enabled:
        yield
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    task = progress.add_task(description, total=None, detail="")
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()

    def poll() -> None:
        tasks = StageTasks()
        while not stop.wait(_POLL_S):
            active: dict[int, tuple[int, int]] = {}
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    active[stage_id] = (info.numCompletedTasks, info.numTasks)
            done, total = tasks.observe(active)
            if total:
                jobs = len(tracker.getActiveJobsIds())
                progress.update(task, completed=done, total=total, detail=f"{jobs} job(s)")

    poller = threading.Thread(target=poll, name="spark-progress", daemon=True)
    with progress:
        poller.start()
        try:
            yield
        finally:
            stop.set()
            poller.join()
            progress.update(task, completed=1, total=1, detail="done")


class StageTasks:
    """Completed and total tasks of every stage seen so far.

    A stage that is no longer active has finished, so its tasks stay counted as done and
    the bar does not drop back when the next stage starts.
    """

    def __init__(self) -> None:
        self._seen: dict[int, tuple[int, int]] = {}

    def observe(self, active: dict[int, tuple[int, int]]) -> tuple[int, int]:
        """``active``: (completed, total) tasks per running stage; returns the sums."""
        for stage_id, (_, total) in self._seen.items():
            if stage_id not in active:
                self._seen[stage_id] = (total, total)
        self._seen.update(active)
        return (
            sum(done for done, _ in self._seen.values()),
            sum(total for _, total in self._seen.values()),
        )
