"""SCRAM credentials in the upstream's config topic (``[store] backend = "kafka"``).

Rows ``["scram", <user>, <mechanism>]`` → ``{"salt": <base64>, "iterations": 8192,
"stored_key": <base64>, "server_key": <base64>}``: the same derived keys the SQLite store
keeps, never a password; a removal is a tombstone.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from quotagate.security.scram import ScramKeys, ScramMechanism
from quotagate.store.credentials import (
    Credentials,
    UserEntry,
    validate_iterations,
    validate_username,
)
from quotagate.store.replicated_table import ReplicatedTable

SCRAM = "scram"


class KafkaCredentialStore(Credentials):
    def __init__(self, table: ReplicatedTable) -> None:
        super().__init__()
        self._table = table

    def close(self) -> None:
        self._table.close()

    def put(self, username: str, mechanism: ScramMechanism, keys: ScramKeys) -> None:
        validate_username(username)
        validate_iterations(keys.iterations)
        self._table.put(
            (SCRAM, username, mechanism.value),
            {
                "salt": _b64(keys.salt),
                "iterations": keys.iterations,
                "stored_key": _b64(keys.stored_key),
                "server_key": _b64(keys.server_key),
            },
        )

    def get(self, username: str, mechanism: ScramMechanism) -> ScramKeys | None:
        row = self._table.get((SCRAM, username, mechanism.value))
        if row is None:
            return None
        try:
            return ScramKeys(
                salt=base64.b64decode(str(row["salt"])),
                iterations=int(row["iterations"]),
                stored_key=base64.b64decode(str(row["stored_key"])),
                server_key=base64.b64decode(str(row["server_key"])),
            )
        except (KeyError, ValueError, TypeError):
            return None  # a record this version cannot read authenticates nobody

    def remove(self, username: str, mechanisms: Iterable[ScramMechanism] | None = None) -> int:
        wanted = tuple(ScramMechanism) if mechanisms is None else tuple(dict.fromkeys(mechanisms))
        removed = 0
        for mechanism in wanted:
            key = (SCRAM, username, mechanism.value)
            if self._table.get(key) is not None:
                self._table.put(key, None)
                removed += 1
        return removed

    def users(self) -> list[UserEntry]:
        entries: dict[str, dict[ScramMechanism, int]] = {}
        for (username, mechanism), row in sorted(self._table.rows(SCRAM).items()):
            try:
                entries.setdefault(username, {})[ScramMechanism(mechanism)] = int(row["iterations"])
            except (KeyError, ValueError, TypeError):
                continue
        return [UserEntry(name, mechanisms) for name, mechanisms in entries.items()]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
