"""Things a caller starts and stops, also as a ``with`` block (a gateway in a thread, a broker
process): written once so that each says only how it starts and how it stops."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Lifecycle(ABC):
    """``with thing:`` starts it, and stops it however the block ends."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
