"""SASL PLAIN (RFC 4616) on the server side, with Kafka's error texts."""

from __future__ import annotations

from collections.abc import Callable

from quotagate.gateway.auth.mechanism import SingleUserExchange
from quotagate.security.protocol import PLAIN
from quotagate.security.sasl import SaslError

PasswordCheck = Callable[[str, str], bool]


class PlainServer(SingleUserExchange):
    """Single-token exchange: ``[authzid] NUL authcid NUL passwd``."""

    def __init__(self, check_password: PasswordCheck) -> None:
        super().__init__(PLAIN)
        self._check_password = check_password
        self._done = False

    def evaluate(self, token: bytes) -> bytes:
        if self._done:
            raise SaslError("Unexpected SASL/PLAIN token after the exchange ended")
        self._done = True
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from exc
        fields = text.split("\x00")
        if len(fields) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
        authzid, username, password = fields
        if not username:
            raise SaslError("Authentication failed: username not specified")
        if not password:
            raise SaslError("Authentication failed: password not specified")
        if not self._check_password(username, password):
            raise SaslError("Authentication failed: Invalid username or password", public=True)
        if authzid and authzid != username:
            raise SaslError(
                "Authentication failed: Client requested an authorization id that is different"
                " from username",
                public=True,
            )
        self._username = username
        return b""
