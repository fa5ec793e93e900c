"""OAUTHBEARER tokens for the gateway's own upstream connections: the client-credentials grant
(RFC 6749 §4.4) as Kafka's HttpAccessTokenRetriever asks for it, cached and fetched again
once 80 % of its lifetime has passed (Kafka's ``sasl.login.refresh.window.factor``).

The HTTP request runs in a thread so the event loop never waits on the token endpoint.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Final

from quotagate.gateway.upstream.security import OAuthClientCredentials

REFRESH_WINDOW_FACTOR: Final = 0.8
_DEFAULT_LIFETIME_S: Final = 3600.0
_TIMEOUT_S: Final = 10.0
MAX_RESPONSE_BYTES: Final = 1 << 20  # a token response is a few KiB; never read more


class OAuthTokenError(ConnectionError):
    """The token endpoint refused or could not be reached; the secret is never in the text."""


class OAuthTokenRefusedError(OAuthTokenError):
    """The token endpoint answered 400, 401 or 403: the client credentials or the scope were
    refused, which no retry will fix."""


_REFUSALS: Final = (400, 401, 403)


def fetch_token(credentials: OAuthClientCredentials) -> tuple[str, float]:
    """(access token, lifetime in seconds) from the token endpoint; blocking."""
    # Kafka URL-encodes both halves before the Basic header (HttpAccessTokenRetriever).
    user = urllib.parse.quote(credentials.client_id, safe="")
    password = urllib.parse.quote(credentials.client_secret.reveal(), safe="")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    form = {"grant_type": "client_credentials"}
    if credentials.scope:
        form["scope"] = credentials.scope
    request = urllib.request.Request(
        credentials.token_endpoint_url,
        data=urllib.parse.urlencode(form).encode("ascii"),
        headers={
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        },
        method="POST",
    )
    url = credentials.token_endpoint_url
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            body = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        text = f"token endpoint {url} answered HTTP {exc.code}{_oauth_error(exc)}"
        if exc.code in _REFUSALS:
            raise OAuthTokenRefusedError(
                f"{text}: check [upstream] sasl.oauthbearer.client.id, .client.secret and .scope"
            ) from None
        raise OAuthTokenError(text) from None
    except (OSError, ValueError) as exc:
        raise OAuthTokenError(f"token endpoint {url} unreachable: {exc}") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise OAuthTokenError(f"token endpoint {url} sent more than {MAX_RESPONSE_BYTES} bytes")
    try:
        document = json.loads(body)
        token = document["access_token"]
        lifetime = float(document.get("expires_in", _DEFAULT_LIFETIME_S))
    except (ValueError, KeyError, TypeError):
        raise OAuthTokenError(f"token endpoint {url} sent no access_token") from None
    if not isinstance(token, str) or not token:
        raise OAuthTokenError(f"token endpoint {url} sent an empty access_token")
    return token, lifetime


def _oauth_error(exc: urllib.error.HTTPError) -> str:
    """RFC 6749 §5.2's ``error`` code of a refusal (``invalid_client``...), when there is one:
    a registered word from a short list, safe to log, where the rest of a body may not be."""
    try:
        document = json.loads(exc.read(4096))
    except (OSError, ValueError):
        return ""
    code = document.get("error") if isinstance(document, dict) else None
    if isinstance(code, str) and code.replace("_", "").isalpha() and len(code) <= 40:
        return f" ({code})"
    return ""


class OAuthTokenSource:
    """One cached token for every upstream connection; refreshed before it expires."""

    def __init__(
        self,
        credentials: OAuthClientCredentials,
        fetch: Callable[[OAuthClientCredentials], tuple[str, float]] = fetch_token,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials = credentials
        self._fetch = fetch
        self._clock = clock
        self._token: str | None = None
        self._refresh_at = 0.0

    def cached(self) -> str | None:
        """The token while it is within its refresh window, else None."""
        if self._token is not None and self._clock() < self._refresh_at:
            return self._token
        return None

    def store(self, token: str, lifetime_s: float, fetched_at: float) -> None:
        self._token = token
        self._refresh_at = fetched_at + max(lifetime_s, 0.0) * REFRESH_WINDOW_FACTOR

    async def token(self) -> str:
        cached = self.cached()
        if cached is not None:
            return cached
        # No lock: one source serves every event loop of the process (tests run several), and
        # connections that race at expiry merely fetch one extra token.
        started = self._clock()
        token, lifetime = await asyncio.to_thread(self._fetch, self._credentials)
        self.store(token, lifetime, started)
        return token
