"""SASL OAUTHBEARER (RFC 7628) on the server side, terminated: Kafka's ``OAuthBearerSaslServer``
with the KIP-768 validator.

One client message carries the token. A token that validates names the principal (the
``sasl.oauthbearer.sub.claim.name`` claim). A refused token is answered as Kafka answers it:
a server challenge holding RFC 7628's error JSON, ``{"status":"invalid_token"}``; the client
replies with a single ``\\x01`` and then gets SASL_AUTHENTICATION_FAILED carrying the same JSON.
Why the token was refused goes to the connection's refusal line (``detail="token refused:
..."``, gateway/refusals.py), never the token itself.
"""

from __future__ import annotations

import time
from typing import Final, Protocol

from quotagate.gateway.auth.jwks import JwksCache
from quotagate.gateway.auth.mechanism import SingleUserExchange
from quotagate.security.oauthbearer import (
    InvalidTokenError,
    MissingKeyError,
    TokenRules,
    ValidatedToken,
    validate,
)
from quotagate.security.oauthbearer_message import InvalidClientFirstError, parse_client_first
from quotagate.security.protocol import OAUTHBEARER
from quotagate.security.sasl import SaslError

INVALID_TOKEN: Final = '{"status":"invalid_token"}'
_CONTROL_A: Final = b"\x01"


class TokenValidator(Protocol):
    def validate(self, token: str) -> ValidatedToken:
        """The token's principal and claims; raises InvalidTokenError."""
        ...

    def close(self) -> None: ...


class JwksTokenValidator:
    """Tokens checked against a listener's JWKS and ``sasl.oauthbearer.*`` rules."""

    def __init__(self, keys: JwksCache, rules: TokenRules) -> None:
        self._keys = keys
        self._rules = rules

    def validate(self, token: str) -> ValidatedToken:
        try:
            # Claims are times since the epoch: they are read against the wall clock.
            return validate(token, self._keys.keys(), self._rules, time.time())
        except MissingKeyError as missing:
            self._keys.missing(missing.key_id, time.monotonic())
            raise

    def close(self) -> None:
        self._keys.close()


class OAuthBearerServer(SingleUserExchange):
    """One OAUTHBEARER exchange; a :class:`~quotagate.gateway.auth.mechanism.MechanismServer`."""

    def __init__(self, validator: TokenValidator, peer: str) -> None:
        super().__init__(OAUTHBEARER)
        self._validator = validator
        self._peer = peer
        self._error: str | None = None
        self._refused = ""

    def evaluate(self, token: bytes) -> bytes:
        if self._username is not None:
            raise SaslError("Unexpected OAUTHBEARER token after the exchange ended")
        if token == _CONTROL_A and self._error is not None:
            # The client acknowledged our error challenge: now the exchange fails.
            raise SaslError(self._error, public=True, detail=f"token refused: {self._refused}")
        self._error = None
        try:
            first = parse_client_first(token)
        except InvalidClientFirstError as exc:
            raise SaslError(str(exc)) from None
        try:
            validated = self._validator.validate(first.token)
        except InvalidTokenError as exc:
            # Logged with the connection's refusal when the client acknowledges the challenge.
            self._refused = str(exc)
            self._error = INVALID_TOKEN
            return INVALID_TOKEN.encode()
        if first.authorization_id and first.authorization_id != validated.principal:
            raise SaslError(
                "Authentication failed: Client requested an authorization id "
                f"({first.authorization_id}) that is different from the token's principal "
                f"name ({validated.principal})",
                public=True,
            )
        self._username = validated.principal
        self._expires_ms = validated.lifetime_ms
        return b""
