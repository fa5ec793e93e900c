"""The gateway as a SASL client of its upstream: SaslHandshake then SaslAuthenticate rounds,
as Kafka's SaslClientAuthenticator sends them, on a freshly opened upstream connection.

Runs over a :class:`~quotagate.gateway.upstream.channel.ControlChannel` before the connection
carries anything else, and again whenever the upstream's session lifetime (KIP-368) asks for a
re-authentication (:class:`~quotagate.gateway.upstream.link.UpstreamLink`); a refusal raises
:class:`UpstreamAuthenticationError` with the upstream's own message (never a credential).
"""

from __future__ import annotations

import contextlib
import functools
import random
from typing import Any, Protocol

from kio.schema.sasl_authenticate.v1 import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest

from quotagate.gateway.upstream.oauth_token import OAuthTokenRefusedError, OAuthTokenSource
from quotagate.gateway.upstream.scram_client import ScramClient
from quotagate.gateway.upstream.security import UpstreamSecurity
from quotagate.security.oauthbearer_message import client_initial_response
from quotagate.security.protocol import OAUTHBEARER, PLAIN
from quotagate.security.sasl import SaslError
from quotagate.security.scram import ScramMechanism, salted_password


class UpstreamAuthenticationError(ConnectionError):
    """The upstream refused the gateway's credentials (or spoke SASL wrongly)."""


class RequestChannel(Protocol):
    async def request(self, body: Any, timeout_s: float) -> Any: ...


@functools.lru_cache(maxsize=64)
def cached_salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """PBKDF2 once per (salt, iterations): every client link authenticates with the same
    credentials, and thousands of iterations per connection would cost milliseconds each."""
    return salted_password(mechanism, password, salt, iterations)


@functools.lru_cache(maxsize=8)
def token_source(spec: UpstreamSecurity) -> OAuthTokenSource:
    """One token cache per spec for the whole process."""
    assert spec.oauth is not None
    return OAuthTokenSource(spec.oauth)


def reauthentication_delay_s(session_lifetime_ms: int, rng: random.Random | None = None) -> float:
    """When to re-authenticate after a session of ``session_lifetime_ms`` began: at a random
    85-95 % of it, as Kafka's SaslClientAuthenticator does (so a fleet of connections opened
    together does not renew all at once)."""
    fraction = 0.85 + 0.10 * (rng or random).random()
    return session_lifetime_ms * fraction / 1000


async def authenticate(channel: RequestChannel, spec: UpstreamSecurity, timeout_s: float) -> int:
    """Authenticate ``channel``; the session lifetime the upstream gave (ms, 0: unlimited)."""
    mechanism = spec.sasl_mechanism
    assert mechanism is not None
    # v1 of both, as Kafka's clients send them (v0's bare tokens predate KIP-152).
    handshake = await channel.request(SaslHandshakeRequest(mechanism=mechanism), timeout_s)
    if int(handshake.error_code) != 0:
        raise UpstreamAuthenticationError(
            f"the broker refused SASL mechanism {mechanism} (error {int(handshake.error_code)}); "
            f"it offers {', '.join(handshake.mechanisms) or 'none'}: set [upstream] "
            "sasl.mechanism to one of those"
        )

    lifetime_ms = 0

    async def round_trip(token: bytes) -> bytes:
        nonlocal lifetime_ms
        response = await channel.request(SaslAuthenticateRequest(auth_bytes=token), timeout_s)
        if int(response.error_code) != 0:
            raise UpstreamAuthenticationError(
                f"the broker refused the {mechanism} credentials: "
                f"{response.error_message or f'error {int(response.error_code)}'}"
            )
        # Only the last answer of an exchange carries it (KIP-368); earlier ones say 0.
        lifetime_ms = max(0, int(response.session_lifetime.total_seconds() * 1000))
        return bytes(response.auth_bytes)

    if mechanism == PLAIN:
        assert spec.sasl_username is not None and spec.sasl_password is not None
        await round_trip(f"\0{spec.sasl_username}\0{spec.sasl_password.reveal()}".encode())
    elif mechanism == OAUTHBEARER:
        try:
            token = await token_source(spec).token()
        except OAuthTokenRefusedError as exc:
            raise UpstreamAuthenticationError(f"OAUTHBEARER: {exc}") from None
        reply = await round_trip(client_initial_response(token))
        if reply:
            # RFC 7628 §3.2.2: an error challenge; the client answers \x01 and the server fails.
            detail = reply.decode("utf-8", "replace")
            with contextlib.suppress(UpstreamAuthenticationError):
                await round_trip(b"\x01")
            raise UpstreamAuthenticationError(f"the broker refused the OAUTHBEARER token: {detail}")
    else:
        assert spec.sasl_username is not None and spec.sasl_password is not None
        client = ScramClient(
            ScramMechanism.from_name(mechanism),
            spec.sasl_username,
            spec.sasl_password.reveal(),
            salted=cached_salted_password,
        )
        try:
            server_first = await round_trip(client.first())
            server_final = await round_trip(client.final(server_first))
            client.verify(server_final)
        except SaslError as exc:
            raise UpstreamAuthenticationError(f"{mechanism} with the broker: {exc}") from None
    return lifetime_ms
