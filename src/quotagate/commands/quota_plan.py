"""What ``quotas apply`` would change: live quotas against a quota file, per entity.

The file is the desired state of the entities it names. Without ``prune`` the plan only adds
and changes values; with it, every live value the file does not name is removed too (a whole
entity the file leaves out, or a key the file leaves out of an entity it names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity, QuotaOp

Action = Literal["add", "change", "remove"]
_SIGN: Final[dict[Action, str]] = {"add": "+", "change": "~", "remove": "-"}
QuotaValues = Mapping[ClientQuotaEntity, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class KeyChange:
    key: str
    old: float | None
    """None: the key has no live value."""
    new: float | None
    """None: the key is removed."""


@dataclass(frozen=True, slots=True)
class EntityPlan:
    entity: ClientQuotaEntity
    action: Action
    """add: no live value yet; remove: every live value goes; change: anything else."""
    changes: tuple[KeyChange, ...]

    def alteration(self) -> ClientQuotaAlteration:
        return ClientQuotaAlteration(
            self.entity, tuple(QuotaOp(c.key, c.new) for c in self.changes)
        )

    def render(self) -> str:
        parts = ", ".join(f"{c.key} {_show(c.old)} -> {_show(c.new)}" for c in self.changes)
        return f"{_SIGN[self.action]} {self.action} {self.entity}: {parts}"

    def as_json(self) -> dict[str, object]:
        return {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in self.entity.entries],
            "action": self.action,
            "changes": [{"key": c.key, "old": c.old, "new": c.new} for c in self.changes],
        }


def plan(live: QuotaValues, wanted: QuotaValues, *, prune: bool) -> list[EntityPlan]:
    """The per-entity changes that turn ``live`` into ``wanted`` (sorted by entity)."""
    plans = []
    for entity in sorted(set(live) | set(wanted), key=str):
        have = live.get(entity, {})
        want = wanted.get(entity, {})
        changes = [
            KeyChange(key, have.get(key), want[key])
            for key in sorted(want)
            if have.get(key) != want[key]
        ]
        if prune:
            changes += [KeyChange(key, have[key], None) for key in sorted(have) if key not in want]
        if not changes:
            continue
        if not have:
            action: Action = "add"
        elif all(c.new is None for c in changes) and len(changes) == len(have) and not want:
            action = "remove"
        else:
            action = "change"
        plans.append(EntityPlan(entity, action, tuple(sorted(changes, key=lambda c: c.key))))
    return plans


def summary(plans: list[EntityPlan]) -> str:
    counts = {action: sum(p.action == action for p in plans) for action in _SIGN}
    return (
        f"Plan: {counts['add']} to add, {counts['change']} to change, {counts['remove']} to remove."
    )


def _show(value: float | None) -> str:
    if value is None:
        return "(none)"
    return str(int(value)) if value.is_integer() else repr(value)
