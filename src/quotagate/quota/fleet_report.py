"""What one worker tells the rest of its fleet: its cumulative usage per shared quota.

A report names its sender (``member``: stable across restarts, e.g. ``gw-a/0``, and
``incarnation``: new at every start) and, per quota kind, one entry per key whose usage
changed since the sender's previous report: the sender's *cumulative* usage of that key and
the increase since its previous report. Receivers subtract cumulative values they have
already seen (so a duplicated or replayed report adds nothing) and fall back to the increase
only for a key they have no baseline for (a receiver that joined late or was restarted).

Cumulative counters are exchanged rather than sample sums because every worker's sample
windows start at its own first record: they do not line up between workers, while a
difference of two cumulative values means the same thing to everyone.

Encoded as compact JSON (``v`` = 1); unknown kinds and extra fields are ignored, so a newer
worker can add a kind without breaking older ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

FORMAT_VERSION: Final = 1

Key = tuple[str, ...]
"""A usage key: ``(user, client_id)`` sharing-key tags, or ``(topic,)``."""


class ReportError(ValueError):
    """Bytes that are not a fleet report this version understands."""


@dataclass(frozen=True, slots=True)
class UsageEntry:
    key: Key
    cumulative: float
    delta: float


@dataclass(frozen=True, slots=True)
class FleetReport:
    member: str
    incarnation: str
    seq: int
    usage: Mapping[str, tuple[UsageEntry, ...]] = field(default_factory=dict)
    farewell: bool = False
    """The sender's process is ending: the last report of this incarnation."""

    def encode(self) -> bytes:
        document = {
            "v": FORMAT_VERSION,
            "member": self.member,
            "inc": self.incarnation,
            "seq": self.seq,
            "usage": {
                kind: [[*entry.key, entry.cumulative, entry.delta] for entry in entries]
                for kind, entries in self.usage.items()
                if entries
            },
        }
        if self.farewell:
            document["bye"] = True
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, key_arity: Mapping[str, int]) -> FleetReport:
        """Parse a report; ``key_arity`` gives the key length of every kind understood."""
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ReportError(f"not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise ReportError("not a JSON object")
        if document.get("v") != FORMAT_VERSION:
            raise ReportError(f"format version {document.get('v')!r}, expected {FORMAT_VERSION}")
        member, incarnation, seq = document.get("member"), document.get("inc"), document.get("seq")
        if not isinstance(member, str) or not member:
            raise ReportError("member must be a non-empty string")
        if not isinstance(incarnation, str) or not incarnation:
            raise ReportError("inc must be a non-empty string")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise ReportError("seq must be an integer")
        raw_usage = document.get("usage", {})
        if not isinstance(raw_usage, dict):
            raise ReportError("usage must be an object")
        usage = {
            kind: _entries(kind, rows, arity)
            for kind, rows in raw_usage.items()
            if (arity := key_arity.get(kind)) is not None
        }
        farewell = document.get("bye", False)
        if not isinstance(farewell, bool):
            raise ReportError("bye must be true or false")
        return cls(member, incarnation, seq, usage, farewell)


def merged(reports: Sequence[FleetReport]) -> FleetReport:
    """Consecutive reports of one sender as one: each key's latest cumulative value and the
    sum of its increases, under the last report's ``seq`` (what a receiver that saw none of
    them would have absorbed, one by one)."""
    last = reports[-1]
    usage: dict[str, dict[Key, UsageEntry]] = {}
    for report in reports:
        for kind, entries in report.usage.items():
            by_key = usage.setdefault(kind, {})
            for entry in entries:
                earlier = by_key.get(entry.key)
                by_key[entry.key] = (
                    entry
                    if earlier is None
                    else UsageEntry(entry.key, entry.cumulative, earlier.delta + entry.delta)
                )
    return FleetReport(
        last.member,
        last.incarnation,
        last.seq,
        {kind: tuple(by_key.values()) for kind, by_key in usage.items()},
        last.farewell,
    )


def _entries(kind: str, rows: Any, arity: int) -> tuple[UsageEntry, ...]:
    if not isinstance(rows, list):
        raise ReportError(f"usage of {kind!r} must be a list")
    entries = []
    for row in rows:
        if not isinstance(row, list) or len(row) != arity + 2:
            raise ReportError(f"a {kind!r} entry must be {arity} key parts and two numbers")
        *key, cumulative, delta = row
        if not all(isinstance(part, str) for part in key):
            raise ReportError(f"a {kind!r} key must be strings")
        if not all(_is_number(n) for n in (cumulative, delta)):
            raise ReportError(f"a {kind!r} entry's cumulative and delta must be numbers")
        entries.append(UsageEntry(tuple(key), float(cumulative), float(delta)))
    return tuple(entries)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
