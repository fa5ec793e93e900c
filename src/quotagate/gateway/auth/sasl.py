"""SASL termination on the Kafka protocol: SaslHandshake (17) and SaslAuthenticate (36).

Mirrors Kafka's SaslServerAuthenticator on the wire:

* before the handshake only ApiVersions (answered by the gateway) and SaslHandshake are
  accepted; any other request closes the connection without a response;
* an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled list, then a close;
* a failed exchange gets SASL_AUTHENTICATION_FAILED with a message, then a close;
* after success SaslHandshake / SaslAuthenticate get ILLEGAL_SASL_STATE and the connection
  stays open, as KafkaApis answers them on an authenticated connection;
* with ``connections.max.reauth.ms`` (KIP-368) the final SaslAuthenticate (v1+) carries the
  session lifetime (for OAUTHBEARER at most the token's remaining life); a new SaslHandshake
  after success then starts a re-authentication (at most one a second, as Kafka), which must
  keep the mechanism and the principal, else it fails and the connection closes; once the
  session has expired, the connection reports it (:meth:`SaslAuthenticator.session_expired`)
  and closes on any request but SaslHandshake / SaslAuthenticate.

Pure: frames in, :class:`AuthResult` out; the clocks are arguments of the constructor.
"""

from __future__ import annotations

import datetime
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from enum import Enum, auto
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v0 as authenticate_v0
from kio.schema.sasl_authenticate import v1 as authenticate_v1
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1
from kio.static.primitive import i64Timedelta

from quotagate.gateway.auth.authenticator import (
    SASL_AUTHENTICATION_FAILED,
    SASL_PROTOCOL_ERROR,
    SASL_UNSUPPORTED_MECHANISM,
    AuthContext,
    AuthResult,
    Refusal,
)
from quotagate.gateway.auth.mechanism import MechanismServer
from quotagate.gateway.auth.oauthbearer import OAuthBearerServer, TokenValidator
from quotagate.gateway.auth.plain import PlainServer
from quotagate.gateway.auth.scram import ScramServer
from quotagate.protocol import codec
from quotagate.protocol.api_keys import SASL_AUTHENTICATE, SASL_HANDSHAKE
from quotagate.protocol.bounds import LengthError, check_body
from quotagate.protocol.framing import with_size_prefix
from quotagate.security.principal import PrincipalBuilder
from quotagate.security.protocol import (
    OAUTHBEARER,
    PLAIN,
    SASL_MECHANISMS,
    SUPPORTED_SASL_MECHANISMS,
)
from quotagate.security.sasl import SaslError
from quotagate.security.scram import ScramKeys, ScramMechanism

log = logging.getLogger(__name__)

_HANDSHAKE_VERSIONS: Final[dict[int, Any]] = {
    0: handshake_v0,
    1: handshake_v1,
}
_AUTHENTICATE_VERSIONS: Final[dict[int, Any]] = {
    0: authenticate_v0,
    1: authenticate_v1,
    2: authenticate_v2,
}
_MIN_REAUTH_INTERVAL_S: Final = 1.0
"""Kafka's broker starts at most one re-authentication a second on a connection; a SaslHandshake
sooner is answered as after any success (ILLEGAL_SASL_STATE)."""


class CredentialSource(Protocol):
    """What SASL needs from the credential store."""

    def get(self, username: str, mechanism: ScramMechanism) -> ScramKeys | None: ...

    def verify_password(self, username: str, password: str) -> bool: ...

    def close(self) -> None: ...


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class _State(Enum):
    HANDSHAKE = auto()
    AUTHENTICATE = auto()
    COMPLETE = auto()
    FAILED = auto()


class SaslAuthenticator:
    """One connection's SASL exchange; an :class:`~quotagate.gateway.auth.Authenticator`."""

    def __init__(
        self,
        context: AuthContext,
        credentials: CredentialSource,
        mechanisms: Sequence[str],
        decoy_secret: bytes,
        tokens: TokenValidator | None = None,
        max_reauth_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        """``tokens`` validates OAUTHBEARER tokens; without it OAUTHBEARER is never offered.
        ``max_reauth_ms``: ``connections.max.reauth.ms`` (0: sessions never expire).
        ``clock`` (seconds, monotonic) times sessions; ``wall_ms`` reads token expiry."""
        self._context = context
        self._tokens = tokens
        self._credentials = credentials
        self._mechanisms = tuple(m for m in mechanisms if m != OAUTHBEARER or tokens is not None)
        self._decoy_secret = decoy_secret
        self._state = _State.HANDSHAKE
        self._server: MechanismServer | None = None
        self._raw_tokens = False
        self._max_reauth_ms = max_reauth_ms
        self._clock = clock
        self._wall_ms = wall_ms
        self._expires_at: float | None = None
        """When the session ends (``clock`` time); None: it never does."""
        self._reauth_started: float | None = None
        self._previous: tuple[str, str] | None = None
        """(mechanism, principal) of the session being re-authenticated."""
        self._bad_mechanism: str | None = None

    @property
    def reauthenticating(self) -> bool:
        """A re-authentication is under way: every request but ApiVersions comes here."""
        return self._previous is not None

    def session_expired(self) -> bool:
        """The session's lifetime is over (KIP-368): the connection may only re-authenticate."""
        expires_at = self._expires_at
        return expires_at is not None and self._clock() > expires_at

    @property
    def expects_raw_tokens(self) -> bool:
        return self._raw_tokens and self._state is _State.AUTHENTICATE

    def handle(
        self, api_key: int, api_version: int, correlation_id: int, request_frame: bytes
    ) -> AuthResult:
        if self._state is _State.FAILED:
            return AuthResult(None, close=True)
        if self._state is _State.COMPLETE and not (
            api_key == SASL_HANDSHAKE and self._begin_reauthentication()
        ):
            return self._after_completion(api_key, api_version, correlation_id)
        if self.expects_raw_tokens:
            return self.handle_token(request_frame)
        if api_key == SASL_HANDSHAKE and self._state is _State.HANDSHAKE:
            return self._handshake(api_version, correlation_id, request_frame)
        if api_key == SASL_AUTHENTICATE and self._state is _State.AUTHENTICATE:
            return self._authenticate(api_version, correlation_id, request_frame)
        if api_key == SASL_HANDSHAKE:
            # A second handshake mid-exchange: Kafka answers with the API's error and closes.
            refusal = self._fail(
                SASL_PROTOCOL_ERROR, f"unexpected SaslHandshake in state {self._state.name}"
            )
            response = self._handshake_response(
                api_version, correlation_id, ErrorCode.illegal_sasl_state
            )
            return AuthResult(response, close=True, refusal=refusal)
        return self._closed(
            f"unexpected request api_key={api_key} during SASL {self._state.name.lower()}"
        )

    def handle_token(self, token: bytes) -> AuthResult:
        if not self.expects_raw_tokens:
            return self._closed("bare SASL token outside a v0 exchange")
        server = self._server
        assert server is not None  # set by the handshake that enabled raw tokens
        try:
            reply = server.evaluate(token)
            principal = self._principal_if_complete(server)
        except SaslError as failure:
            # Without SaslAuthenticate headers Kafka has no way to say why: it just closes.
            return self._closed(failure.detail, SASL_AUTHENTICATION_FAILED)
        if principal is not None:
            self._start_session(server)  # no way to tell the client: it is closed at expiry
        return AuthResult(with_size_prefix(reply), principal=principal)

    def _handshake(self, version: int, correlation_id: int, frame: bytes) -> AuthResult:
        module = _HANDSHAKE_VERSIONS.get(version)
        if module is None:
            return self._closed(f"unsupported SaslHandshake version {version}")
        request = _decode_request(module.SaslHandshakeRequest, frame)
        if request is None:
            return self._closed("malformed SaslHandshake request")
        mechanism: str = request.mechanism
        if mechanism not in self._mechanisms:
            refusal = self._fail(
                SASL_UNSUPPORTED_MECHANISM, f"unsupported SASL mechanism {mechanism!r}"
            )
            response = self._handshake_response(
                version, correlation_id, ErrorCode.unsupported_sasl_mechanism
            )
            return AuthResult(response, close=True, refusal=refusal)
        previous = self._previous
        if previous is not None and mechanism != previous[0]:
            # Kafka accepts the handshake and fails the SaslAuthenticate that follows.
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{previous[0]}'"
            )
        self._server = self._new_server(mechanism)
        self._raw_tokens = version == 0
        self._state = _State.AUTHENTICATE
        return AuthResult(self._handshake_response(version, correlation_id, ErrorCode.none))

    def _authenticate(self, version: int, correlation_id: int, frame: bytes) -> AuthResult:
        module = _AUTHENTICATE_VERSIONS.get(version)
        if module is None:
            # Kafka cannot build an error response for a version it does not know: it closes.
            return self._closed(f"unsupported SaslAuthenticate version {version}")
        request = _decode_request(module.SaslAuthenticateRequest, frame)
        if request is None:
            return self._closed("malformed SaslAuthenticate request")
        server = self._server
        assert server is not None  # set by the handshake
        try:
            if self._bad_mechanism is not None:
                raise SaslError(self._bad_mechanism, public=True)
            reply = server.evaluate(request.auth_bytes)
            principal = self._principal_if_complete(server)
        except SaslError as failure:
            refusal = self._fail(SASL_AUTHENTICATION_FAILED, failure.detail)
            message = (
                failure.message
                if failure.public
                else "Authentication failed during authentication due to invalid credentials"
                f" with SASL mechanism {server.mechanism}"
            )
            response = _authenticate_response(
                module, correlation_id, ErrorCode.sasl_authentication_failed, message, b""
            )
            return AuthResult(response, close=True, refusal=refusal)
        lifetime_ms = self._start_session(server) if principal is not None else 0
        response = _authenticate_response(
            module, correlation_id, ErrorCode.none, None, reply, lifetime_ms
        )
        return AuthResult(response, principal=principal)

    def _begin_reauthentication(self) -> bool:
        """A SaslHandshake on an authenticated connection: start re-authenticating when this
        listener has sessions that expire and the last start is at least a second ago."""
        if self._expires_at is None or self._server is None:
            return False
        now = self._clock()
        started = self._reauth_started
        if started is not None and now - started < _MIN_REAUTH_INTERVAL_S:
            return False
        self._reauth_started = now
        server = self._server
        self._previous = (server.mechanism, PrincipalBuilder.from_sasl(server.username))
        self._bad_mechanism = None
        self._state = _State.HANDSHAKE
        return True

    def _start_session(self, server: MechanismServer) -> int:
        """The session lifetime for the client (KIP-368), and when the session ends here."""
        if self._max_reauth_ms <= 0:
            return 0
        lifetime_ms = self._max_reauth_ms
        credential_expires_ms = server.credential_expires_ms
        if credential_expires_ms is not None:
            lifetime_ms = max(0, min(lifetime_ms, credential_expires_ms - self._wall_ms()))
        self._expires_at = self._clock() + lifetime_ms / 1000
        return lifetime_ms

    def _after_completion(self, api_key: int, version: int, correlation_id: int) -> AuthResult:
        if api_key == SASL_HANDSHAKE and version in _HANDSHAKE_VERSIONS:
            return AuthResult(
                self._handshake_response(version, correlation_id, ErrorCode.illegal_sasl_state, ())
            )
        if api_key == SASL_AUTHENTICATE and version in _AUTHENTICATE_VERSIONS:
            return AuthResult(
                _authenticate_response(
                    _AUTHENTICATE_VERSIONS[version],
                    correlation_id,
                    ErrorCode.illegal_sasl_state,
                    "SaslAuthenticate request received after successful authentication",
                    b"",
                )
            )
        log.warning(
            "SASL: request api_key=%d v%d after authentication from %s:%d closes the connection",
            api_key,
            version,
            self._context.peer_host,
            self._context.peer_port,
        )
        return AuthResult(None, close=True)

    def _principal_if_complete(self, server: MechanismServer) -> str | None:
        """The principal once the exchange is complete; SaslError when a re-authentication
        names another one than the session had (Kafka refuses to change principals)."""
        if not server.complete:
            return None
        principal = PrincipalBuilder.from_sasl(server.username)
        previous = self._previous
        if previous is not None and principal != previous[1]:
            raise SaslError(
                "Cannot change principals during re-authentication from "
                f"{_dotted(previous[1])}: {_dotted(principal)}",
                public=True,
            )
        self._state = _State.COMPLETE
        self._previous = None
        log.info(
            "SASL: %s %s as %s via %s on listener %s",
            f"{self._context.peer_host}:{self._context.peer_port}",
            "authenticated" if previous is None else "re-authenticated",
            principal,
            server.mechanism,
            self._context.listener,
        )
        return principal

    def _new_server(self, mechanism: str) -> MechanismServer:
        if mechanism == PLAIN:
            return PlainServer(self._credentials.verify_password)
        if mechanism == OAUTHBEARER:
            assert self._tokens is not None  # only offered with a validator
            peer = f"{self._context.peer_host}:{self._context.peer_port}"
            return OAuthBearerServer(self._tokens, peer)
        return ScramServer(
            ScramMechanism.from_name(mechanism), self._credentials.get, self._decoy_secret
        )

    def _handshake_response(
        self,
        version: int,
        correlation_id: int,
        error: ErrorCode,
        mechanisms: Sequence[str] | None = None,
    ) -> bytes:
        module = _HANDSHAKE_VERSIONS.get(version, handshake_v1)
        body = module.SaslHandshakeResponse(
            error_code=error,
            mechanisms=tuple(self._mechanisms if mechanisms is None else mechanisms),
        )
        return _encode_response(module.SaslHandshakeResponse, correlation_id, body)

    def _closed(self, detail: str, reason: str = SASL_PROTOCOL_ERROR) -> AuthResult:
        """Fail, and close the connection without an answer."""
        return AuthResult(None, close=True, refusal=self._fail(reason, detail))

    def _fail(self, reason: str, detail: str) -> Refusal:
        """The exchange is over; the connection logs the refusal (rate-limited) and counts it."""
        server = self._server
        self._state = _State.FAILED
        self._server = None
        if self._previous is not None:
            detail = f"re-authentication: {detail}"
        return Refusal(reason, detail, server.mechanism if server is not None else None)


class SaslAuthenticatorFactory:
    """Builds the per-connection authenticator of a SASL listener (an AuthenticatorFactory).

    ``mechanisms`` are those enabled on every listener unless ``listener_mechanisms`` names
    the listener (Kafka's ``listener.name.<l>.sasl.enabled.mechanisms``).
    """

    def __init__(
        self,
        credentials: CredentialSource,
        mechanisms: Sequence[str] = SASL_MECHANISMS,
        listener_mechanisms: Mapping[str, Sequence[str]] | None = None,
        listener_tokens: Mapping[str, TokenValidator] | None = None,
        listener_max_reauth_ms: Mapping[str, int] | None = None,
    ) -> None:
        """``listener_tokens``: the OAUTHBEARER token validator of each listener that has one.
        ``listener_max_reauth_ms``: ``connections.max.reauth.ms`` of each listener with one."""
        self._credentials = credentials
        self._listener_max_reauth_ms = dict(listener_max_reauth_ms or {})
        self._listener_tokens = dict(listener_tokens or {})
        self._mechanisms = _checked(mechanisms)
        self._listener_mechanisms = {
            name: _checked(names) for name, names in (listener_mechanisms or {}).items()
        }
        # Per process, so decoy salts for unknown users stay stable while the gateway runs.
        self._decoy_secret = secrets.token_bytes(32)

    def mechanisms(self, listener: str) -> tuple[str, ...]:
        return self._listener_mechanisms.get(listener, self._mechanisms)

    def close(self) -> None:
        """Close the credential store and every token validator: a store on the upstream
        follows its topic from a thread, a JWKS cache refreshes from one."""
        self._credentials.close()
        for validator in self._listener_tokens.values():
            validator.close()

    def __call__(self, context: AuthContext) -> SaslAuthenticator:
        return SaslAuthenticator(
            context,
            self._credentials,
            self.mechanisms(context.listener),
            self._decoy_secret,
            self._listener_tokens.get(context.listener),
            self._listener_max_reauth_ms.get(context.listener, 0),
        )


def _checked(mechanisms: Sequence[str]) -> tuple[str, ...]:
    unknown = [m for m in mechanisms if m not in SUPPORTED_SASL_MECHANISMS]
    if unknown:
        raise ValueError(
            f"unsupported SASL mechanism(s) {', '.join(unknown)};"
            f" supported: {', '.join(SUPPORTED_SASL_MECHANISMS)}"
        )
    if not mechanisms:
        raise ValueError("a SASL listener needs at least one enabled mechanism")
    return tuple(dict.fromkeys(mechanisms))


def _decode_request(request_type: Any, frame: bytes) -> Any | None:
    """The body of a request (``frame`` without its size prefix), or None when it does not parse."""
    try:
        body_offset = check_body(request_type.__header_schema__, frame, 0)
        return codec.decode_body(request_type, frame, body_offset)
    except (LengthError, codec.CodecError):
        return None


def _dotted(principal: str) -> str:
    """``User:alice`` as Kafka writes principals in its re-authentication error: ``User.alice``."""
    kind, _, name = principal.partition(":")
    return f"{kind}.{name}"


def _authenticate_response(
    module: Any,
    correlation_id: int,
    error: ErrorCode,
    message: str | None,
    auth_bytes: bytes,
    session_lifetime_ms: int = 0,
) -> bytes:
    fields: dict[str, Any] = {
        "error_code": error,
        "error_message": message,
        "auth_bytes": auth_bytes,
    }
    if module is not authenticate_v0:  # v0 has no session lifetime (KIP-368 is v1)
        fields["session_lifetime"] = i64Timedelta.parse(
            datetime.timedelta(milliseconds=session_lifetime_ms)
        )
    body = module.SaslAuthenticateResponse(**fields)
    return _encode_response(module.SaslAuthenticateResponse, correlation_id, body)


def _encode_response(response_type: Any, correlation_id: int, body: Any) -> bytes:
    assert isinstance(body, response_type)
    return codec.encode_response_frame(body, correlation_id)
