"""The bounded hand-over both usage sinks feed their threads through: it never blocks the
side that adds, holds at most its capacity, and gives the worker every row taken before
close, in order, then the end."""

from __future__ import annotations

import threading

from quotagate.usage.handover import BatchHandOver


def _close_and_drain(rows: BatchHandOver[int]) -> list[int]:
    """Everything the worker gets, closed from another thread: close may wait for it."""
    taken: list[int] = []

    def work() -> None:
        while (batch := rows.take(0.01)) is not None:
            taken.extend(batch)

    worker = threading.Thread(target=work)
    worker.start()
    rows.close()
    worker.join(10)
    assert not worker.is_alive()
    return taken


def test_a_worker_that_is_behind_makes_add_refuse_at_once_within_the_capacity() -> None:
    rows: BatchHandOver[int] = BatchHandOver(capacity=100)
    accepted = [n for n in range(1_000) if rows.add(n)]
    assert 0 < len(accepted) <= 100
    assert rows.pending == len(accepted)
    # The refused rows are the newest: what was taken is a prefix, nothing in it is lost.
    assert accepted == list(range(len(accepted)))
    assert _close_and_drain(rows) == accepted


def test_a_flush_while_the_worker_is_behind_keeps_the_rows_for_the_next_batch() -> None:
    rows: BatchHandOver[int] = BatchHandOver(capacity=8)
    first = list(range(rows.batch_rows))
    for n in first:
        assert rows.add(n)
    rows.flush()
    assert rows.add(100)
    rows.flush()  # the first batch still waits and the queue has no room: a no-op
    assert rows.pending == len(first) + 1
    assert rows.take(0) == first
    rows.flush()
    assert rows.take(0) == [100]


def test_after_close_add_refuses_and_a_second_close_does_nothing() -> None:
    rows: BatchHandOver[int] = BatchHandOver(capacity=10)
    assert rows.add(1)
    assert _close_and_drain(rows) == [1]
    assert rows.closed
    assert not rows.add(2)
    assert not rows.close()


def test_take_gives_an_empty_batch_when_nothing_came_in_time() -> None:
    rows: BatchHandOver[int] = BatchHandOver(capacity=10)
    assert rows.take(0) == []
    assert rows.take(0.01) == []
    rows.add(1)
    rows.flush()
    assert rows.take(0.01) == [1]
