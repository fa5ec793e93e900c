"""Per-item outcomes of an admin call (per topic, per quota entity)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from quotagate.client.errors import KafkaError

K = TypeVar("K")


class AdminResult(Mapping[K, KafkaError | None], Generic[K]):
    """Item → None on success or the error it failed with, in the order items were given.

    Like Java's per-topic futures: one topic failing does not fail the others;
    :meth:`raise_on_error` is the ``all().get()`` shortcut.
    """

    def __init__(self, outcomes: Mapping[K, KafkaError | None]) -> None:
        self._outcomes = dict(outcomes)

    def __getitem__(self, key: K) -> KafkaError | None:
        return self._outcomes[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return len(self._outcomes)

    @property
    def errors(self) -> dict[K, KafkaError]:
        return {key: error for key, error in self._outcomes.items() if error is not None}

    @property
    def succeeded(self) -> list[K]:
        return [key for key, error in self._outcomes.items() if error is None]

    def raise_on_error(self) -> None:
        """Raise the first item's error, if any item failed."""
        for error in self._outcomes.values():
            if error is not None:
                raise error

    def __repr__(self) -> str:
        return f"AdminResult({self._outcomes!r})"
