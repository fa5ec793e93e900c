"""What every server-side SASL mechanism looks like to the Kafka-protocol layer."""

from __future__ import annotations

from typing import Protocol


class MechanismServer(Protocol):
    """One authentication exchange on the server side: client tokens in, challenges out."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str:
        """The authenticated user; only valid once ``complete``."""
        ...

    @property
    def credential_expires_ms(self) -> int | None:
        """When the credential presented expires (ms since the epoch), None when it does not:
        only OAUTHBEARER tokens do. KIP-368 caps the session at it."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """Consume the client's next token; return the server's reply (possibly empty).

        Raises SaslError when the exchange fails; the server is then unusable.
        """
        ...


class SingleUserExchange:
    """What PLAIN and OAUTHBEARER servers share: complete once they name the user."""

    def __init__(self, mechanism: str) -> None:
        self._mechanism = mechanism
        self._username: str | None = None
        self._expires_ms: int | None = None

    @property
    def credential_expires_ms(self) -> int | None:
        return self._expires_ms

    @property
    def mechanism(self) -> str:
        return self._mechanism

    @property
    def complete(self) -> bool:
        return self._username is not None

    @property
    def username(self) -> str:
        if self._username is None:
            raise RuntimeError(f"{self._mechanism} exchange has not completed")
        return self._username
