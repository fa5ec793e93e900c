"""The JWKS keys are fetched at start, again every refresh.ms, and at once for an unknown key id
(once a minute per id, the time an argument). A refresh is awaited, never timed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from quotagate.gateway.auth.jwks import JwksCache, JwksError
from quotagate.gateway.auth.setup import token_validator
from quotagate.gateway.config import ConfigError, ListenerConfig
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.protocol.host_port import HostPort
from quotagate.security.oauthbearer import InvalidTokenError, MissingKeyError, TokenRules, validate
from support.oauth import ISSUER, IdentityProvider, SigningKey

RULES = TokenRules(expected_audience=("kafka",), expected_issuer=ISSUER)


@pytest.fixture
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        yield served


def test_keys_are_refreshed_every_refresh_ms(provider: IdentityProvider, wait_for: Any) -> None:
    cache = JwksCache(provider.jwks_url, refresh_ms=50)
    cache.load()
    try:
        rotated = SigningKey()
        provider.published = [rotated]
        token = provider.mint("alice", key=rotated)

        def accepted() -> bool:
            try:
                return validate(token, cache.keys(), RULES, time.time()).principal == "alice"
            except MissingKeyError:
                return False

        wait_for(accepted, 30, "the rotated key, fetched by the refresh timer")
        assert provider.jwks_requests >= 2
    finally:
        cache.close()


def test_an_unknown_key_id_refreshes_once_a_minute(provider: IdentityProvider) -> None:
    cache = JwksCache(provider.jwks_url)
    cache.load()
    cache.missing("new-key", 10.0)
    cache.join(10)
    assert provider.jwks_requests == 2
    cache.missing("new-key", 69.0)
    cache.join(10)
    assert provider.jwks_requests == 2
    cache.missing("other-key", 69.0)
    cache.join(10)
    assert provider.jwks_requests == 3
    cache.missing("new-key", 70.0)
    cache.join(10)
    assert provider.jwks_requests == 4
    cache.missing("x" * 1001, 200.0)  # too long to be a key id worth a fetch (as Kafka)
    cache.join(10)
    assert provider.jwks_requests == 4


def test_a_failed_refresh_keeps_the_keys(provider: IdentityProvider) -> None:
    cache = JwksCache(provider.jwks_url, retry_backoff_ms=10, retry_backoff_max_ms=200)
    cache.load()
    token = provider.mint("alice")
    provider.published = []  # the endpoint now serves an empty set: not usable
    cache.missing("gone", 1.0)
    cache.join(30)
    assert provider.jwks_requests > 2  # retried with backoff
    assert validate(token, cache.keys(), RULES, time.time()).principal == "alice"


def test_an_unreachable_jwks_stops_the_start() -> None:
    url = f"http://{LOOPBACK}:{free_port()}/jwks.json"
    with pytest.raises(JwksError, match="cannot read the JWKS"):
        JwksCache(url).load()
    listener = ListenerConfig(
        name="OAUTH",
        listen=HostPort(LOOPBACK, 9999),
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms=("OAUTHBEARER",),
        oauthbearer_jwks_endpoint_url=url,
    )
    with pytest.raises(ConfigError, match=f"listener OAUTH: cannot read the JWKS at {url}"):
        token_validator(listener)


def test_the_validator_checks_with_the_listener_rules(provider: IdentityProvider) -> None:
    listener = ListenerConfig(
        name="OAUTH",
        listen=HostPort(LOOPBACK, 9999),
        security_protocol="SASL_PLAINTEXT",
        sasl_enabled_mechanisms=("OAUTHBEARER",),
        oauthbearer_jwks_endpoint_url=provider.jwks_url,
        oauthbearer_expected_audience=("kafka",),
        oauthbearer_sub_claim_name="client_id",
    )
    validator = token_validator(listener)
    assert validator.validate(provider.mint(None, client_id="svc")).principal == "svc"
    with pytest.raises(InvalidTokenError):
        validator.validate(provider.mint("alice", audience="web"))
