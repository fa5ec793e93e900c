"""An OAuth identity provider on loopback, made by the test: keys, a JWKS, a token endpoint.

``http.server`` in a thread serves ``/jwks.json`` (the public keys, changeable while it runs)
and ``/token`` (OAuth 2 client credentials, RFC 6749 §4.4: HTTP Basic or form client
authentication, answering a signed JWT whose ``sub`` is the client id and whose ``scope`` is
the one asked for). ``mint`` signs tokens with any claims, for the refusals a real provider
would not issue (``REFUSED_TOKENS``).

Also what a test needs around it: the listener fields of a gateway that validates its tokens,
client configs for librdkafka (its own OIDC flow, or a token handed over as it is), and the
check that no secret and no part of a token reached a log.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ISSUER = "https://idp.quotagate.test"
AUDIENCE = "kafka"


class SigningKey:
    def __init__(self, key_id: str | None = None) -> None:
        self.key_id = key_id or uuid.uuid4().hex[:12]
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def public_jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.key_id, "use": "sig", "alg": "RS256"}


class IdentityProvider:
    def __init__(self) -> None:
        self.key = SigningKey()
        self.published: list[SigningKey] = [self.key]
        self.clients: dict[str, str] = {}
        """client id -> secret, for the token endpoint."""
        self.token_lifetime_s = 3600
        self.jwks_requests = 0
        self.issued: list[str] = []
        self.granted: list[tuple[str, str | None]] = []
        """(client id, ``scope`` asked for) of each token issued by the endpoint, in order."""
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks.json"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def mint(
        self,
        subject: str | None = "alice",
        *,
        key: SigningKey | None = None,
        audience: str | None = AUDIENCE,
        issuer: str | None = ISSUER,
        expires_in: float = 3600,
        issued_at: float | None = None,
        **claims: Any,
    ) -> str:
        signer = key or self.key
        now = time.time() if issued_at is None else issued_at
        payload: dict[str, Any] = {"iat": int(now), "exp": int(now + expires_in), **claims}
        for name, value in (("sub", subject), ("aud", audience), ("iss", issuer)):
            if value is not None:
                payload[name] = value
        return jwt.encode(payload, signer.private, "RS256", headers={"kid": signer.key_id})

    def validating_listener(self) -> dict[str, Any]:
        """ListenerConfig fields of an OAUTHBEARER listener validating this provider's tokens
        (KIP-768: its JWKS, audience and issuer)."""
        return {
            "sasl_enabled_mechanisms": ("OAUTHBEARER",),
            "oauthbearer_jwks_endpoint_url": self.jwks_url,
            "oauthbearer_expected_audience": (AUDIENCE,),
            "oauthbearer_expected_issuer": ISSUER,
        }

    def client_config(self, bootstrap: str, client: str) -> dict[str, Any]:
        """librdkafka fetching its tokens from the token endpoint as ``client``
        (``sasl.oauthbearer.method=oidc``), over SASL_PLAINTEXT."""
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client,
            "sasl.oauthbearer.client.secret": self.clients[client],
            "sasl.oauthbearer.token.endpoint.url": self.token_url,
        }

    def assert_not_logged(self, log: str, *tokens: str) -> None:
        """No client secret, and no part of any token issued or of ``tokens``, in ``log``."""
        assert log, "nothing was logged: the search below would prove nothing"
        for secret in self.clients.values():
            assert secret not in log
        for token in (*self.issued, *tokens):
            for section in token.split("."):
                assert section not in log  # neither the token nor any part of it

    @contextmanager
    def serving(self) -> Iterator[IdentityProvider]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                provider.jwks_requests += 1
                self._json(200, {"keys": [k.public_jwk() for k in provider.published]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                client_id, secret = self._client(form)
                if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                    self._json(400, {"error": "unsupported_grant_type"})
                elif client_id is None or provider.clients.get(client_id) != secret:
                    self._json(401, {"error": "invalid_client"})
                else:
                    scope = form.get("scope", [None])[0]
                    provider.granted.append((client_id, scope))
                    claims = {} if scope is None else {"scope": scope}
                    token = provider.mint(client_id, expires_in=provider.token_lifetime_s, **claims)
                    provider.issued.append(token)
                    self._json(
                        200,
                        {
                            "access_token": token,
                            "token_type": "Bearer",
                            "expires_in": provider.token_lifetime_s,
                        },
                    )

            def _client(self, form: dict[str, list[str]]) -> tuple[str | None, str | None]:
                header = self.headers.get("Authorization", "")
                if header.startswith("Basic "):
                    user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
                    return user, secret
                return form.get("client_id", [None])[0], form.get("client_secret", [None])[0]

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the tests read the gateway's log, not this server's

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(10)


def handing_over(bootstrap: str, token: str) -> dict[str, Any]:
    """librdkafka presenting ``token`` as it is (it sends what ``oauth_cb`` gives)."""

    def oauth_cb(_config: str) -> tuple[str, float]:
        return token, time.time() + 3600

    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }


REFUSED_TOKENS: dict[str, Callable[[IdentityProvider], str]] = {
    "expired": lambda p: p.mint("alice", issued_at=time.time() - 7200, expires_in=3600),
    "wrong audience": lambda p: p.mint("alice", audience="web"),
    "bad signature": lambda p: p.mint("alice", key=SigningKey(p.key.key_id)),
}
"""Tokens a validating listener must refuse, each minted by the provider for ``alice``."""
