"""Rows taken one at a time on the event loop and handed a batch at a time to a worker thread,
through a bounded queue, without ever blocking the event loop.

What both usage sinks (the Parquet writer here, the Kafka topic publisher in ``fleet``) are
fed through: a slow disk or a cluster that is gone must never slow the data path, so the
event loop pays a list append per row and a queue hand-over per few thousand, and when the
worker falls ``capacity`` rows behind, :meth:`BatchHandOver.add` refuses the row at once.
Counting and logging what is refused is the sink's: each says why in its own terms.
"""

from __future__ import annotations

import queue
from typing import Final, Generic, TypeVar

T = TypeVar("T")

_BATCH_ROWS: Final = 2048


class BatchHandOver(Generic[T]):
    """``add``/``flush`` from one thread (the event loop), ``take`` from the worker thread,
    ``close`` once, after the last ``add``, from any thread."""

    def __init__(self, capacity: int) -> None:
        """``capacity``: rows that may wait for the worker before ``add`` refuses more."""
        # At most half the capacity a batch, so that a small capacity still has two batches:
        # one being filled while the other waits.
        self.batch_rows = max(1, min(_BATCH_ROWS, capacity // 2))
        # Batches waiting for the worker plus the one being filled hold at most capacity.
        # None is the stop marker: a batch is never None, and never empty.
        self._queue: queue.Queue[list[T] | None] = queue.Queue(
            max(1, capacity // self.batch_rows - 1)
        )
        self._batch: list[T] = []
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        """Rows taken and not yet with the worker (at most ``capacity``)."""
        return self._queue.qsize() * self.batch_rows + len(self._batch)

    def add(self, row: T) -> bool:
        """Take one row; False when closed or when the worker is that far behind."""
        if self._closed:
            return False
        batch = self._batch
        if len(batch) >= self.batch_rows:
            if not self._hand_over():
                return False
            batch = self._batch
        batch.append(row)
        return True

    def flush(self) -> None:
        """Hand the rows taken so far to the worker; a no-op while it is behind (the rows
        stay in the batch being filled and go with it)."""
        if self._batch:
            self._hand_over()

    def _hand_over(self) -> bool:
        try:
            self._queue.put_nowait(self._batch)
        except queue.Full:
            return False
        self._batch = []
        return True

    def close(self) -> bool:
        """Hand over the rows taken and tell the worker to stop after them; False when closed
        already (then the worker was told before)."""
        if self._closed:
            return False
        self._closed = True
        if self._batch:
            batch, self._batch = self._batch, []
            self._queue.put(batch)  # may wait for the worker: closing is allowed to
        self._queue.put(None)
        return True

    # -- worker thread ---------------------------------------------------------------------

    def take(self, timeout_s: float) -> list[T] | None:
        """The next batch, waiting at most ``timeout_s`` (0: not at all); empty when none
        came in time, None once every batch handed over before :meth:`close` was taken."""
        try:
            return self._queue.get(timeout_s > 0, timeout_s)
        except queue.Empty:
            return []
