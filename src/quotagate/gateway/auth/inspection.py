"""SASL passthrough: the client's SaslHandshake and SaslAuthenticate go to the upstream, which
decides; the gateway watches both directions to learn who the client is.

The name comes from the client's own tokens (PLAIN's authorization id, else its authentication
id; SCRAM's client-first ``n=`` with ``=2C``/``=3D`` decoded; OAUTHBEARER's token claim,
``sub`` by default, read as Kafka's validator reads it) and is adopted as ``User:<name>``
(built by security/principal.py, as every principal is) only once the upstream's
SaslAuthenticate response says the exchange succeeded. A refusal is relayed untouched and the
connection closes after it, as Kafka closes. Re-authentication (KIP-368) starts a new inspection.

Pure: frames in, :class:`Verdict` out. Every read goes through the codec's bounds-checked
decoding; the token parsers below only read what they were given.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, Final

from quotagate.gateway.auth.authenticator import (
    SASL_AUTHENTICATION_FAILED,
    SASL_PROTOCOL_ERROR,
    SASL_UNSUPPORTED_MECHANISM,
    Refusal,
)
from quotagate.protocol import api_keys, codec
from quotagate.protocol.headers import RequestHeader
from quotagate.security.oauthbearer import InvalidTokenError, claimed_principal
from quotagate.security.oauthbearer_message import InvalidClientFirstError, parse_client_first
from quotagate.security.principal import PrincipalBuilder
from quotagate.security.protocol import OAUTHBEARER, PLAIN, SCRAM_MECHANISMS
from quotagate.security.scram import client_first_username

INSPECTED_MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
MAX_CLAIM_LENGTH: Final = 1024  # a principal name longer than this is not a name


@dataclass(frozen=True, slots=True)
class Verdict:
    """``principal``: adopt it now; ``close``: close (after relaying, for a response)."""

    principal: str | None = None
    close: bool = False
    reason: str = ""
    kind: str = SASL_PROTOCOL_ERROR
    """The refusal's label when ``close`` (authenticator.Refusal)."""


_GO_ON: Final = Verdict()


class _State(Enum):
    IDLE = auto()
    HANDSHAKE = auto()
    AUTHENTICATE = auto()


class SaslInspector:
    """One client connection's passthrough exchanges."""

    def __init__(self, sub_claim_name: str = "sub") -> None:
        self._claim = sub_claim_name
        self._state = _State.IDLE
        self._mechanism = ""
        self._candidate: str | None = None
        self._rounds = 0

    def request(self, header: RequestHeader, frame: bytes) -> Verdict:
        """A SaslHandshake or SaslAuthenticate from the client (``frame`` with its size
        prefix); ``close`` means: close now, forward nothing."""
        if header.api_key == api_keys.SASL_HANDSHAKE:
            if header.api_version == 0:
                # v0 sends the tokens as bare frames without headers: nothing to match the
                # upstream's answers to. Clients since Kafka 1.0 send v1.
                return Verdict(
                    close=True,
                    reason="SaslHandshake v0 cannot be passed through",
                    kind=SASL_UNSUPPORTED_MECHANISM,
                )
            body = _decode_request(header, frame)
            if body is None:
                return Verdict(close=True, reason="malformed SaslHandshake request")
            mechanism = str(body.mechanism)
            if mechanism not in INSPECTED_MECHANISMS:
                return Verdict(
                    close=True,
                    reason=f"SASL mechanism {mechanism!r} cannot be passed through "
                    f"(passthrough learns principals from {', '.join(INSPECTED_MECHANISMS)})",
                    kind=SASL_UNSUPPORTED_MECHANISM,
                )
            self._mechanism, self._candidate, self._rounds = mechanism, None, 0
            self._state = _State.HANDSHAKE
            return _GO_ON
        if self._state is _State.IDLE:
            return Verdict(close=True, reason="SaslAuthenticate before SaslHandshake")
        body = _decode_request(header, frame)
        if body is None:
            return Verdict(close=True, reason="malformed SaslAuthenticate request")
        if self._rounds == 0:
            self._candidate = principal_name(self._mechanism, bytes(body.auth_bytes), self._claim)
        self._rounds += 1
        return _GO_ON

    def refusal(self, verdict: Verdict) -> Refusal:
        """A closing verdict as the connection logs and counts it."""
        return Refusal(verdict.kind, verdict.reason, self._mechanism or None)

    def response(self, api_key: int, api_version: int, frame: bytes) -> Verdict:
        """The upstream's answer to a request :meth:`request` let through."""
        try:
            body = codec.decode_response(frame, api_key, api_version)
        except codec.CodecError:
            return Verdict(close=True, reason="malformed SASL response from the upstream")
        error = int(body.error_code)
        if api_key == api_keys.SASL_HANDSHAKE:
            if error != 0:
                return Verdict(
                    close=True,
                    reason=f"upstream refused the mechanism (error {error})",
                    kind=SASL_UNSUPPORTED_MECHANISM,
                )
            self._state = _State.AUTHENTICATE
            return _GO_ON
        if error != 0:
            self._state = _State.IDLE
            message = body.error_message or f"error {error}"
            return Verdict(
                close=True,
                reason=f"upstream refused authentication: {message}",
                kind=SASL_AUTHENTICATION_FAILED,
            )
        if not self._complete(bytes(body.auth_bytes)):
            return _GO_ON
        self._state = _State.IDLE
        if self._candidate is None:
            return Verdict(
                close=True,
                reason=f"the upstream accepted a {self._mechanism} exchange the gateway could not "
                "read a principal from",
            )
        return Verdict(principal=PrincipalBuilder.from_sasl(self._candidate))

    def _complete(self, auth_bytes: bytes) -> bool:
        if self._mechanism in SCRAM_MECHANISMS:
            return self._rounds >= 2  # client-first, then client-final
        if self._mechanism == OAUTHBEARER:
            # A non-empty answer is RFC 7628's error challenge: the client sends \x01 next and
            # the upstream then fails the exchange.
            return not auth_bytes
        return True  # PLAIN: one round


def _decode_request(header: RequestHeader, frame: bytes) -> Any | None:
    try:
        return codec.decode_request(frame, header)
    except codec.CodecError:
        return None


# -- names from client tokens (pure, bounded by the token they are given) -------------------


def principal_name(mechanism: str, token: bytes, claim: str = "sub") -> str | None:
    """The principal name a client's first token claims, or None when it names none."""
    if mechanism == PLAIN:
        return plain_name(token)
    if mechanism in SCRAM_MECHANISMS:
        return scram_name(token)
    if mechanism == OAUTHBEARER:
        return oauthbearer_name(token, claim)
    return None


def plain_name(token: bytes) -> str | None:
    """RFC 4616 ``[authzid] NUL authcid NUL passwd``: the authorization id when given, as
    Kafka's PlainSaslServer (which refuses one that differs from the authentication id)."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    authzid, authcid = parts[0], parts[1]
    return _text(authzid or authcid)


def scram_name(token: bytes) -> str | None:
    text = _text(token, limit=len(token))
    name = None if text is None else client_first_username(text)
    return name if name and len(name) <= MAX_CLAIM_LENGTH else None


def oauthbearer_name(token: bytes, claim: str) -> str | None:
    """RFC 7628 client first message, read with Kafka's grammar; the JWT's claim as Kafka's
    validator reads it, the token itself not verified (the upstream verifies it)."""
    try:
        name = claimed_principal(parse_client_first(token).token, claim)
    except (InvalidClientFirstError, InvalidTokenError):
        return None
    return name if len(name) <= MAX_CLAIM_LENGTH else None


def _text(raw: bytes, limit: int = MAX_CLAIM_LENGTH) -> str | None:
    if not raw or len(raw) > limit:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
