"""The progress bar's task counts across Spark stages."""

from __future__ import annotations

from quotagate.pipeline.progress import StageTasks


def test_finished_stages_stay_counted_as_done() -> None:
    tasks = StageTasks()
    assert tasks.observe({}) == (0, 0)
    assert tasks.observe({1: (3, 10)}) == (3, 10)
    assert tasks.observe({1: (9, 10)}) == (9, 10)
    # Stage 1 finished between two polls and stage 2 started: the bar must not go back.
    assert tasks.observe({2: (0, 4)}) == (10, 14)
    assert tasks.observe({2: (4, 4), 3: (1, 2)}) == (15, 16)
    assert tasks.observe({}) == (16, 16)
