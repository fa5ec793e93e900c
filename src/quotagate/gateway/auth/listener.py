"""One listener authenticator per client connection, chosen once per listener: the seam Kafka
calls ``ChannelBuilders`` / ``Authenticator``.

A listener authenticates its clients in one of four ways, each behind
:class:`ListenerAuthenticator`:

* :class:`Anonymous` (PLAINTEXT, or SSL without client certificates): every client is
  ``User:ANONYMOUS`` and no request is looked at;
* :class:`Certificate` (SSL verifying client certificates): the principal is read from the
  certificate once, when the connection is made, and no request is looked at after that;
* :class:`Terminate` (SASL, the gateway checks the credentials): every request goes to the
  SASL exchange until it names a principal; after that only SaslHandshake and SaslAuthenticate,
  and every request while re-authenticating (KIP-368); a request on an expired session closes
  the connection, as Kafka's broker does;
* :class:`Passthrough` (SASL, the upstream checks the credentials): the SASL requests are
  forwarded and their answers read for the principal; any other request before that closes.

ApiVersions never reaches an authenticator: clients send it before SaslHandshake, and the
gateway answers it itself. The connection owns all I/O: an authenticator gets a request's
header and frame and answers with a step (:data:`Step`), so its rules are tested without
sockets (tests/gateway/test_listener_auth.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Protocol

from quotagate.gateway.auth.authenticator import (
    ANONYMOUS,
    SASL_PROTOCOL_ERROR,
    AuthContext,
    Authenticator,
    AuthenticatorFactory,
    AuthResult,
    Refusal,
)
from quotagate.gateway.auth.inspection import SaslInspector
from quotagate.gateway.config import SASL_PASSTHROUGH, ListenerConfig
from quotagate.gateway.refusals import CERTIFICATE_UNMAPPED
from quotagate.gateway.stages.exchange import ConnectionInfo
from quotagate.logs import kv
from quotagate.protocol import api_keys
from quotagate.protocol.headers import RequestHeader
from quotagate.security.principal import PrincipalBuilder, PrincipalError
from quotagate.security.protocol import SecurityProtocol

__all__ = [
    "FORWARD",
    "RAW_TOKEN",
    "Anonymous",
    "Certificate",
    "Close",
    "Forward",
    "ListenerAuthenticator",
    "Passthrough",
    "Step",
    "Terminate",
    "listener_authenticators",
]

log = logging.getLogger(__name__)

SASL_KEYS: Final = frozenset({api_keys.SASL_HANDSHAKE, api_keys.SASL_AUTHENTICATE})
RAW_TOKEN: Final = RequestHeader(-1, 0, 0, None, -1)
"""The header a bare SASL token (SaslHandshake v0, before KIP-152) is handled under."""


class Close:
    """Close the connection now; with ``refusal``, the client failed its authentication."""

    __slots__ = ("event", "level", "reason", "refusal")

    def __init__(
        self,
        reason: str,
        level: int = logging.DEBUG,
        refusal: Refusal | None = None,
        event: str = "authentication_failed",
    ) -> None:
        self.reason = reason
        self.level = level
        self.refusal = refusal
        self.event = event
        """The refusal's log event."""


class Forward:
    """Forward the request to the upstream; its response goes to :meth:`on_response`."""

    __slots__ = ()


FORWARD: Final = Forward()

Step = AuthResult | Forward | Close | None
"""What the connection does with a request: answer it (:class:`AuthResult`), forward it and
watch the answer (:data:`FORWARD`), close (:class:`Close`), or hand it to the stages (None)."""


class ListenerAuthenticator(Protocol):
    """Authenticates one client connection of a listener; one instance per connection."""

    @property
    def watches_requests(self) -> bool:
        """False when no request after the connect needs looking at (the same for every
        connection of the listener): the connection then pays no call per request."""
        ...

    @property
    def watches_responses(self) -> bool:
        """True when SASL responses from the upstream must go to :meth:`on_response`."""
        ...

    @property
    def expects_raw_tokens(self) -> bool:
        """The next frame is a bare SASL token, not a request: hand it over under
        :data:`RAW_TOKEN` without decoding a header."""
        ...

    def on_connect(
        self, info: ConnectionInfo, certificate: Callable[[], bytes | None]
    ) -> str | Close | None:
        """The principal known from the connect alone, None when it is still to be learned,
        or a :class:`Close`. ``certificate``: the client's verified DER certificate."""
        ...

    def on_request(self, header: RequestHeader, frame: bytes) -> Step:
        """One request other than ApiVersions (``frame`` with its size prefix)."""
        ...

    def on_response(self, header: RequestHeader, frame: bytes) -> AuthResult | None:
        """The upstream's answer to a forwarded SASL request: ``response`` is always None
        (the upstream's frame goes to the client as it was sent)."""
        ...


class Anonymous:
    """PLAINTEXT, and SSL without client certificates: every client is ``User:ANONYMOUS``."""

    watches_requests: Final = False
    watches_responses: Final = False
    expects_raw_tokens: Final = False

    def on_connect(
        self, info: ConnectionInfo, certificate: Callable[[], bytes | None]
    ) -> str | Close | None:
        return ANONYMOUS

    def on_request(self, header: RequestHeader, frame: bytes) -> Step:
        return None

    def on_response(self, header: RequestHeader, frame: bytes) -> AuthResult | None:
        return None


class Certificate(Anonymous):
    """SSL with client certificates: the principal is the certificate's, mapped by
    ``ssl.principal.mapping.rules``; a certificate no rule maps fails the authentication."""

    def __init__(self, principals: PrincipalBuilder) -> None:
        self._principals = principals

    def on_connect(
        self, info: ConnectionInfo, certificate: Callable[[], bytes | None]
    ) -> str | Close | None:
        try:
            principal = self._principals.from_certificate(certificate())
        except PrincipalError as exc:
            # Kafka fails the connection's authentication when no rule maps the subject.
            return Close(
                f"ssl principal: {exc}",
                refusal=Refusal(CERTIFICATE_UNMAPPED, str(exc)),
                event="certificate_refused",
            )
        log.info(
            kv(
                "tls_principal",
                id=info.connection_id,
                client=info.client_address,
                listener=info.listener,
                principal=principal,
            )
        )
        return principal


class _Sasl:
    """What the two SASL kinds share: the principal learned, logged when it changes."""

    def __init__(self) -> None:
        self._principal: str | None = None
        self._info: ConnectionInfo | None = None

    def _learned(self, principal: str) -> None:
        if principal != self._principal:
            self._principal = principal
            info = self._info
            assert info is not None, "on_connect first"
            log.info(
                kv(
                    "authenticated",
                    id=info.connection_id,
                    client=info.client_address,
                    principal=principal,
                )
            )


class Terminate(_Sasl):
    """SASL terminated by the gateway, around the connection's :class:`Authenticator`."""

    watches_requests: Final = True
    watches_responses: Final = False

    def __init__(self, factory: AuthenticatorFactory | None, max_reauth_ms: int | None) -> None:
        super().__init__()
        self._factory = factory
        self._max_reauth_ms = max_reauth_ms
        self._sasl: Authenticator | None = None

    @property
    def expects_raw_tokens(self) -> bool:
        return self._sasl is not None and self._sasl.expects_raw_tokens

    def on_connect(
        self, info: ConnectionInfo, certificate: Callable[[], bytes | None]
    ) -> str | Close | None:
        self._info = info
        if self._factory is None:
            return Close("no authenticator configured for a SASL listener", logging.ERROR)
        self._sasl = self._factory(
            AuthContext(info.listener, info.security_protocol, info.client_host, info.client_port)
        )
        return None

    def on_request(self, header: RequestHeader, frame: bytes) -> Step:
        sasl = self._sasl
        assert sasl is not None, "on_connect first"
        if header is RAW_TOKEN:
            return self._learn(sasl.handle_token(frame[4:]))
        key = header.api_key
        if self._principal is None or key in SASL_KEYS or sasl.reauthenticating:
            return self._learn(
                sasl.handle(key, header.api_version, header.correlation_id, frame[4:])
            )
        if sasl.session_expired():
            # KIP-368: Kafka's broker disconnects an expired session on its next request.
            return Close(
                f"SASL session expired: api_key={key} without re-authentication "
                f"(connections.max.reauth.ms = {self._max_reauth_ms})",
                logging.WARNING,
            )
        return None

    def _learn(self, result: AuthResult) -> AuthResult:
        if result.principal is not None:
            self._learned(result.principal)
        return result

    def on_response(self, header: RequestHeader, frame: bytes) -> AuthResult | None:
        return None


class Passthrough(_Sasl):
    """SASL passed through: the upstream authenticates; the gateway forwards the exchange and
    reads the principal from it (:class:`SaslInspector`), adopted on the upstream's success."""

    watches_requests: Final = True
    watches_responses: Final = True
    expects_raw_tokens: Final = False

    def __init__(self, sub_claim_name: str) -> None:
        super().__init__()
        self._inspector = SaslInspector(sub_claim_name)

    def on_connect(
        self, info: ConnectionInfo, certificate: Callable[[], bytes | None]
    ) -> str | Close | None:
        self._info = info
        return None

    def on_request(self, header: RequestHeader, frame: bytes) -> Step:
        key = header.api_key
        if key not in SASL_KEYS:
            if self._principal is not None:
                return None
            # Kafka closes a connection that sends anything else before authenticating.
            detail = f"api_key={key} before SASL authentication"
            return Close(detail, refusal=Refusal(SASL_PROTOCOL_ERROR, detail))
        inspector = self._inspector
        verdict = inspector.request(header, frame)
        if verdict.close:
            return Close(f"SASL passthrough: {verdict.reason}", refusal=inspector.refusal(verdict))
        return FORWARD

    def on_response(self, header: RequestHeader, frame: bytes) -> AuthResult | None:
        if header.api_key not in SASL_KEYS:
            return None
        inspector = self._inspector
        verdict = inspector.response(header.api_key, header.api_version, frame)
        if verdict.principal is not None:
            self._learned(verdict.principal)
        refusal = inspector.refusal(verdict) if verdict.close else None
        return AuthResult(None, verdict.principal, verdict.close, refusal)


def listener_authenticators(
    listener: ListenerConfig,
    sasl: AuthenticatorFactory | None,
    principals: PrincipalBuilder | None,
) -> Callable[[], ListenerAuthenticator]:
    """How the listener's connections authenticate, decided once for the listener.

    ``sasl``: the gateway's SASL termination (None when no listener terminates SASL);
    ``principals``: on an SSL listener that verifies client certificates, what maps them.
    """
    if listener.sasl_mode == SASL_PASSTHROUGH:
        claim = listener.oauthbearer_sub_claim_name
        return lambda: Passthrough(claim)
    if listener.security_protocol in SecurityProtocol.SASL:
        max_reauth_ms = listener.connections_max_reauth_ms
        return lambda: Terminate(sasl, max_reauth_ms)
    if principals is not None:
        certificates = Certificate(principals)
        return lambda: certificates
    anonymous = Anonymous()
    return lambda: anonymous
