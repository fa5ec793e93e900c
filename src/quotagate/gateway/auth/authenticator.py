"""The seam between a connection and whoever authenticates it.

A PLAINTEXT listener needs no authenticator: every connection is ``User:ANONYMOUS``.
On a SASL_PLAINTEXT or SASL_SSL listener the connection hands each request frame to an
:class:`Authenticator` until it reports a principal; after that only SaslHandshake and
SaslAuthenticate still go to it, and every request while it re-authenticates (KIP-368). A
connection whose session has expired is closed on any other request, as Kafka's broker does.
ApiVersions is always answered by the gateway itself, authenticated or not, because clients
send it before SaslHandshake.

The connection owns all I/O. The authenticator is pure protocol: bytes in, an
:class:`AuthResult` out, so it can be tested without sockets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from quotagate.gateway.refusals import Refusal
from quotagate.security.principal import ANONYMOUS
from quotagate.security.protocol import SecurityProtocol

__all__ = [
    "ANONYMOUS",
    "AuthContext",
    "AuthResult",
    "Authenticator",
    "AuthenticatorFactory",
    "Refusal",
    "SecurityProtocol",
]


SASL_AUTHENTICATION_FAILED: Final = "sasl_authentication_failed"
SASL_UNSUPPORTED_MECHANISM: Final = "sasl_unsupported_mechanism"
SASL_PROTOCOL_ERROR: Final = "sasl_protocol_error"


@dataclass(frozen=True, slots=True)
class AuthResult:
    """What the connection must do after the authenticator saw one request.

    ``response`` is a complete frame, 4-byte length prefix included, or ``None`` when the
    request gets no answer. ``principal`` is set (e.g. ``"User:alice"``) once authentication
    has succeeded. ``close`` asks the connection to close after writing ``response``; Kafka
    closes on a failed authentication and on a non-SASL request before authentication.
    """

    response: bytes | None
    principal: str | None = None
    close: bool = False
    refusal: Refusal | None = None
    """Set when this request failed the authentication: the connection logs and counts it."""


@dataclass(frozen=True, slots=True)
class AuthContext:
    """What an authenticator may know about the connection it serves."""

    listener: str
    security_protocol: str
    peer_host: str
    peer_port: int


class Authenticator(Protocol):
    """Authenticates one client connection; one instance per connection."""

    def handle(
        self, api_key: int, api_version: int, correlation_id: int, request_frame: bytes
    ) -> AuthResult:
        """Consume one request (``request_frame`` without its 4-byte length prefix)."""
        ...

    @property
    def expects_raw_tokens(self) -> bool:
        """True while the next frame is a bare SASL token rather than a Kafka request.

        After a SaslHandshake v0 (pre-KIP-152 clients) the SASL tokens travel as plain
        length-prefixed frames with no request header. While this is true the connection must
        not decode a header: it passes each frame to :meth:`handle_token` instead.
        """
        ...

    def handle_token(self, token: bytes) -> AuthResult:
        """Consume one bare SASL token (the frame without its 4-byte length prefix)."""
        ...

    @property
    def reauthenticating(self) -> bool:
        """A re-authentication (KIP-368) is under way on the authenticated connection."""
        ...

    def session_expired(self) -> bool:
        """The authenticated session's lifetime (KIP-368) is over."""
        ...


AuthenticatorFactory = Callable[[AuthContext], Authenticator]
"""Builds the authenticator of a new connection on a SASL listener."""
