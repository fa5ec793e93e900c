"""Where usage events go: what the gateway's response step hands each event to.

:class:`quotagate.usage.writer.UsageWriter` (Parquet files) and the Kafka usage sink
(``[usage] sink = "kafka"``, built by the enforcement runtime on ``fleet``'s publisher) both
take rows without blocking and drop, counted, what they cannot keep up with; :class:`Both`
feeds two of them.
"""

from __future__ import annotations

from typing import Any, Protocol


class UsageSink(Protocol):
    """``add``/``flush`` from the event loop only, ``close`` once after the last ``add``."""

    @property
    def dropped(self) -> int: ...

    @property
    def written(self) -> int: ...

    def add(self, row: tuple[Any, ...]) -> bool: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Both:
    """Two sinks fed the same events (``sink = ["parquet", "kafka"]``)."""

    def __init__(self, first: UsageSink, second: UsageSink) -> None:
        self.first = first
        self.second = second

    @property
    def dropped(self) -> int:
        return self.first.dropped + self.second.dropped

    @property
    def written(self) -> int:
        return self.first.written + self.second.written

    def add(self, row: tuple[Any, ...]) -> bool:
        first = self.first.add(row)
        return self.second.add(row) and first

    def flush(self) -> None:
        self.first.flush()
        self.second.flush()

    def close(self) -> None:
        self.first.close()
        self.second.close()
