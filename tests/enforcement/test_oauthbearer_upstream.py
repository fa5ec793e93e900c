"""OAUTHBEARER end to end through an upstream that validates tokens itself.

The upstream that decides is a second quotagate in terminate mode with OAUTHBEARER only (KIP-768
validation against the JWKS, expected audience and issuer), in front of tansu. The test is the
identity provider (support.oauth: keys made by the test, a JWKS and a client-credentials token
endpoint on loopback).

(a) The gateway authenticates to that upstream itself: ``[upstream] sasl.mechanism =
"OAUTHBEARER"`` with the client-credentials flow (token endpoint, client id, ``${env:}`` client
secret, scope); clients on its PLAINTEXT listener produce and consume, and the upstream names
every link ``User:quotagate-gw``. A wrong client secret is refused by the token endpoint and
logged at ERROR on every attempt, never the secret. The fleet's topics (librdkafka) log in
with the same client credentials.

(b) A passthrough listener in front of the same upstream: confluent-kafka clients with OIDC
tokens for ``sub=alice`` and ``sub=bob`` authenticate to the upstream through the gateway; the
gateway names them from the token the upstream accepted, and a ``producer_byte_rate`` on
``User:alice`` holds alice to 0.95-1.05 x (measured from the gateway's usage events, as the
other quota tests measure) while bob runs free; kafka-python, aiokafka and KafkaJS, each with a
token of its own, produce and consume through it and are named by it. (Debian's kcat cannot
join them: its librdkafka 2.0.2 is built without OIDC, so it can only send unsigned tokens,
which a validating upstream refuses.) Expired, wrong-audience and
wrongly signed tokens are refused by the upstream, and that refusal reaches the client as an
authentication error.

Every log line of both gateways (one process, read whole at DEBUG) is searched for every
secret and every token, and every part of a token.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from kafka.net.sasl.oauth import AbstractTokenProvider as KpTokenProvider

from quotagate.gateway.upstream.security import UpstreamSecurity, parse_upstream_security
from support.clients import (
    aiokafka_round_trip,
    authentication_error,
    confluent_round_trip,
    kafka_python_round_trip,
    kafkajs,
    new_topic,
    topic_log_round_trip,
)
from support.greedy import assert_alice_held_while_bob_runs_free
from support.log_lines import discovery_refusals
from support.oauth import REFUSED_TOKENS, IdentityProvider, handing_over

pytestmark = pytest.mark.integration

QUOTA = 300_000
WHO = ("alice", "bob")
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
GATEWAY_CLIENT = "quotagate-gw"
GATEWAY_SCOPE = "kafka.gateway"
SECRETS = {
    "alice": "alice-oidc-S3cret",
    "bob": "bob-oidc-S3cret",
    GATEWAY_CLIENT: "gateway-oidc-S3cret",
}
SECRET_ENV = "QUOTAGATE_TEST_OAUTH_CLIENT_SECRET"


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        served.clients.update(SECRETS)
        yield served


@pytest.fixture
def decider(quota_tansu: Any, start_quota_gateway: Any, provider: IdentityProvider) -> Any:
    """The upstream that decides: OAUTHBEARER terminated and validated (KIP-768)."""
    return start_quota_gateway(
        quota_tansu.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        listener=provider.validating_listener(),
        sasl=True,
    )


def gateway_security(
    provider: IdentityProvider, monkeypatch: pytest.MonkeyPatch, secret: str
) -> UpstreamSecurity:
    """``[upstream]`` as a user writes it, the client secret from the environment."""
    monkeypatch.setenv(SECRET_ENV, secret)
    return parse_upstream_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": provider.token_url,
            "sasl.oauthbearer.client.id": GATEWAY_CLIENT,
            "sasl.oauthbearer.client.secret": f"${{env:{SECRET_ENV}}}",
            "sasl.oauthbearer.scope": GATEWAY_SCOPE,
        }
    )


def _lines(caplog: pytest.LogCaptureFixture, logger: str = "") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith(logger or "quotagate")]


def _assert_no_secret(
    caplog: pytest.LogCaptureFixture, provider: IdentityProvider, *tokens: str
) -> None:
    provider.assert_not_logged("\n".join(_lines(caplog)), *tokens)


def _authenticated_by_decider(caplog: pytest.LogCaptureFixture, principal: str) -> bool:
    # The terminating side's own line: "SASL: <peer> authenticated as <principal> via ..."
    return any(
        f"authenticated as {principal} via OAUTHBEARER" in line
        for line in _lines(caplog, "quotagate.gateway.auth.sasl")
    )


# -- (a) the gateway's own OAUTHBEARER client credentials ------------------------------------


def test_the_gateway_authenticates_to_its_upstream_with_client_credentials(
    decider: Any,
    start_quota_gateway: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    wait_for: Callable[..., Any],
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    gateway = start_quota_gateway(
        decider.bootstrap,
        upstream_security=gateway_security(provider, monkeypatch, SECRETS[GATEWAY_CLIENT]),
    )
    plain = {"bootstrap.servers": gateway.bootstrap}
    topic = new_topic(plain, "oauth-up")
    values = [f"gw-oauth-{i}".encode() for i in range(30)]
    received = confluent_round_trip(plain, topic, values, wait_for, skip_errors=True)
    assert sorted(received) == sorted(values)
    # The token endpoint saw the gateway's client-credentials request with its scope, and
    # the upstream validated that token and named the gateway by it.
    assert (GATEWAY_CLIENT, GATEWAY_SCOPE) in provider.granted
    assert _authenticated_by_decider(caplog, f"User:{GATEWAY_CLIENT}")
    _assert_no_secret(caplog, provider)


def test_a_wrong_client_secret_is_refused_every_attempt_and_never_logged(
    decider: Any,
    start_quota_gateway: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    wait_for: Callable[..., Any],
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    wrong = "not-the-gateway-S3cret"
    start_quota_gateway(
        decider.bootstrap, upstream_security=gateway_security(provider, monkeypatch, wrong)
    )

    wait_for(lambda: len(discovery_refusals(caplog)) >= 2, 20, "two refused discovery attempts")
    # ERROR, as a refused password: waiting will not fix it. The endpoint's RFC 6749 error
    # code is shown, never the secret.
    expected = f"SASL: OAUTHBEARER: token endpoint {provider.token_url} answered HTTP 401"
    refusals = discovery_refusals(caplog)
    assert all(f"{expected} (invalid_client)" in line for line in refusals), refusals
    assert wrong not in "\n".join(_lines(caplog))
    _assert_no_secret(caplog, provider)


def test_the_fleet_topics_log_in_with_the_same_client_credentials(
    decider: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store's and usage exchange's librdkafka clients get the same spec, translated to
    librdkafka's own OIDC client-credentials flow."""
    caplog.set_level(logging.DEBUG, logger="quotagate")
    security = gateway_security(provider, monkeypatch, SECRETS[GATEWAY_CLIENT])
    config = security.librdkafka_config()
    topic = f"_quotagate.oauth-{uuid.uuid4().hex[:8]}.config"
    granted_before = len(provider.granted)
    seen = topic_log_round_trip(decider.bootstrap, topic, config, b"k", b"over oauthbearer")
    assert seen == [(b"k", b"over oauthbearer")]
    assert (GATEWAY_CLIENT, GATEWAY_SCOPE) in provider.granted[granted_before:]
    assert _authenticated_by_decider(caplog, f"User:{GATEWAY_CLIENT}")
    _assert_no_secret(caplog, provider)


# -- (b) passthrough: the upstream validates the clients' own tokens --------------------------


@pytest.fixture
def passthrough(
    decider: Any,
    start_quota_gateway: Any,
    provider: IdentityProvider,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Any:
    return start_quota_gateway(
        decider.bootstrap,
        quotas=WINDOWS,
        usage={"path": str(tmp_path / "usage")},
        security_protocol="SASL_PLAINTEXT",
        listener={"sasl_mode": "passthrough"},
        upstream_security=gateway_security(provider, monkeypatch, SECRETS[GATEWAY_CLIENT]),
    )


def test_alice_is_held_to_her_user_quota_through_passthrough_and_bob_is_not(
    passthrough: Any,
    provider: IdentityProvider,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    configs = {who: provider.client_config(passthrough.bootstrap, who) for who in WHO}
    rows = assert_alice_held_while_bob_runs_free(
        passthrough, configs, tmp_path / "usage", QUOTA, WINDOWS
    )
    # ApiVersions, answered before authentication, is recorded without a principal.
    # Requests before authentication (ApiVersions) name nobody and are not usage events.
    assert {r["principal"] for r in rows} == {"User:alice", "User:bob"}
    # The upstream saw the clients themselves (its ACLs could act on them), and the gateway's
    # own connections as the gateway.
    for principal in ("User:alice", "User:bob", f"User:{GATEWAY_CLIENT}"):
        assert _authenticated_by_decider(caplog, principal), principal
    assert {client for client, _ in provider.granted} >= {"alice", "bob", GATEWAY_CLIENT}
    _assert_no_secret(caplog, provider)


class _KafkaPythonToken(KpTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


class _AioKafkaToken(AioTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


VALUES = [f"oauth-pt-{i}".encode() for i in range(20)]


def _kafka_python_round_trip(bootstrap: str, topic: str, token: str) -> list[bytes]:
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": _KafkaPythonToken(token),
    }
    return kafka_python_round_trip(config, topic, VALUES)


def _aiokafka_round_trip(bootstrap: str, topic: str, token: str) -> list[bytes]:
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": _AioKafkaToken(token),
    }
    return aiokafka_round_trip(config, topic, VALUES)


ROUND_TRIPS: dict[str, Callable[[str, str, str], list[bytes]]] = {
    "kafka-python": _kafka_python_round_trip,
    "aiokafka": _aiokafka_round_trip,
}


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_python_clients_through_passthrough_with_their_own_tokens(
    passthrough: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    client: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    who = f"carol-{client}"
    token = provider.mint(who)
    topic = new_topic(provider.client_config(passthrough.bootstrap, "bob"), "oauth-up")
    received = ROUND_TRIPS[client](passthrough.bootstrap, topic, token)
    assert sorted(received) == sorted(VALUES)
    # Validated by the upstream, named by the gateway from the same token.
    assert _authenticated_by_decider(caplog, f"User:{who}")
    assert any(
        "event=authenticated" in line and f"principal=User:{who}" in line
        for line in _lines(caplog, "quotagate.gateway.auth.listener")
    )
    _assert_no_secret(caplog, provider, token)


def test_kafkajs_through_passthrough_with_its_own_token(
    passthrough: Any, provider: IdentityProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """KafkaJS hands the gateway a token of its own (its ``oauthBearerProvider``); the admin,
    producer and consumer connections all pass to the upstream with it."""
    caplog.set_level(logging.DEBUG, logger="quotagate")
    who = "carol-kafkajs"
    token = provider.mint(who)
    topic = f"oauth-up-kafkajs-{uuid.uuid4().hex[:8]}"
    done = kafkajs(
        *("round-trip", passthrough.bootstrap, topic, "50", f"group-{topic}"),
        env={"KAFKAJS_OAUTH_TOKEN": token},
    )
    assert done == {
        "created": True,
        "produced": 50,
        "consumed": 50,
        "exactlyOnce": True,
        "deleted": True,
    }
    assert _authenticated_by_decider(caplog, f"User:{who}")
    _assert_no_secret(caplog, provider, token)


REASONS = {
    "expired": "The JWT is no longer valid",
    "wrong audience": "doesn't contain an acceptable identifier",
    "bad signature": "Signature verification failed",
}
"""What the deciding side logs for each of REFUSED_TOKENS."""


@pytest.mark.parametrize("why", sorted(REFUSED_TOKENS))
def test_the_upstreams_refusal_reaches_the_client_as_an_authentication_error(
    passthrough: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    wait_for: Callable[..., Any],
    why: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    token = REFUSED_TOKENS[why](provider)
    config = {**handing_over(passthrough.bootstrap, token), "message.timeout.ms": 3000}
    # The upstream's own answer (RFC 7628's error status), relayed as it sent it.
    assert "invalid_token" in authentication_error(config, wait_for, 15)
    # Both gateways' refusals, each one line at WARNING: the decider's says why it refused the
    # token, the passthrough gateway's that its upstream refused.
    refusals = _lines(caplog, "quotagate.gateway.refusals")
    assert any(
        "event=authentication_failed" in line and "token refused: " in line and REASONS[why] in line
        for line in refusals
    )
    assert any(
        "event=authentication_failed" in line
        and "mechanism=OAUTHBEARER" in line
        and "upstream refused authentication" in line
        for line in refusals
    )
    # Neither side took the name the refused token claimed.
    assert not any("User:alice" in line for line in _lines(caplog))
    _assert_no_secret(caplog, provider, token)
