"""The gateway's OAUTHBEARER client-credentials tokens against a token endpoint served by the
test on loopback: the request Kafka's HttpAccessTokenRetriever makes, caching and refresh at
80 % of the lifetime (clock injected, no waiting), and refusals that never show the secret."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from quotagate.gateway.settings.secret import Secret
from quotagate.gateway.upstream.oauth_token import (
    OAuthTokenError,
    OAuthTokenRefusedError,
    OAuthTokenSource,
    fetch_token,
)
from quotagate.gateway.upstream.security import OAuthClientCredentials

SECRET = "s3cr:t/&="


class TokenEndpoint:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.issued = 0
        self.lifetime = 100
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                auth = base64.b64decode(self.headers["Authorization"].removeprefix("Basic "))
                user, _, password = auth.decode().partition(":")
                creds = (urllib.parse.unquote(user), urllib.parse.unquote(password))
                endpoint.requests.append({"form": form, "credentials": creds})
                if creds != ("gateway", SECRET):
                    self.send_response(401)
                    self.end_headers()
                    return
                endpoint.issued += 1
                body = json.dumps(
                    {"access_token": f"token-{endpoint.issued}", "expires_in": endpoint.lifetime}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"


@pytest.fixture
def endpoint() -> Iterator[TokenEndpoint]:
    served = TokenEndpoint()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def credentials(url: str, secret: str = SECRET) -> OAuthClientCredentials:
    return OAuthClientCredentials(url, "gateway", Secret(secret), scope="kafka")


def test_the_client_credentials_request(endpoint: TokenEndpoint) -> None:
    assert fetch_token(credentials(endpoint.url)) == ("token-1", 100.0)
    (request,) = endpoint.requests
    assert request["form"] == {"grant_type": "client_credentials", "scope": "kafka"}
    assert request["credentials"] == ("gateway", SECRET)


def test_refused_credentials_never_show_the_secret(endpoint: TokenEndpoint) -> None:
    with pytest.raises(OAuthTokenRefusedError, match="HTTP 401") as caught:
        fetch_token(credentials(endpoint.url, "wrong-secret"))
    assert "wrong-secret" not in str(caught.value)
    with pytest.raises(OAuthTokenError, match="unreachable") as unreachable:
        fetch_token(credentials("http://127.0.0.1:1/token"))
    # Unreachable may heal by waiting; refused credentials will not.
    assert not isinstance(unreachable.value, OAuthTokenRefusedError)


def test_tokens_are_cached_and_refreshed_before_they_expire(endpoint: TokenEndpoint) -> None:
    now = [1000.0]
    source = OAuthTokenSource(credentials(endpoint.url), clock=lambda: now[0])

    async def token() -> str:
        return await source.token()

    assert asyncio.run(token()) == "token-1"
    now[0] += 79  # within 80 % of the 100 s lifetime: the cached token
    assert asyncio.run(token()) == "token-1"
    now[0] += 2  # past 80 %: a fresh one, before the old one expires
    assert asyncio.run(token()) == "token-2"
    assert endpoint.issued == 2
