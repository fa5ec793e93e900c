"""The users a SASL-terminating gateway checks passwords against, in a credential store the
test owns (PLAIN and SCRAM alike read it)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from quotagate.store.credentials import CredentialStore


@contextmanager
def sasl_users(path: Path, passwords: Mapping[str, str]) -> Iterator[CredentialStore]:
    """A credential store at ``path`` holding each user's password; closed when done."""
    store = CredentialStore.open(path)
    try:
        for name, password in passwords.items():
            # Kafka's minimum SCRAM iterations: the tests log in often, not for security.
            store.set_password(name, password, iterations=4096)
        yield store
    finally:
        store.close()
