"""OAUTHBEARER terminated by the real gateway in front of tansu, with confluent-kafka.

The test is the identity provider: its keys, a JWKS and a client-credentials token endpoint
on loopback (support.oauth). alice and bob get tokens from that endpoint through librdkafka's
own OIDC flow (``sasl.oauthbearer.method=oidc``); a ``producer_byte_rate`` on ``User:alice``
holds alice (``sub=alice``) to the quota while bob runs free. Tokens the provider would not
issue (expired, for another audience, signed by another key) are handed over by an
``oauth_cb`` and refused with an authentication error at the client. The gateway's log,
read whole at DEBUG, never shows a token or a client secret.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.store.quotas import Change
from support.greedy import assert_held, measured_rate, race, usage_rows
from support.oauth import AUDIENCE, ISSUER, IdentityProvider, SigningKey

pytestmark = pytest.mark.integration

QUOTA = 300_000
WHO = ("alice", "bob")
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
SECRETS = {"alice": "alice-client-S3cret", "bob": "bob-client-S3cret"}


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        served.clients.update(SECRETS)
        yield served


def _listener(provider: IdentityProvider) -> dict[str, Any]:
    return {
        "sasl_enabled_mechanisms": ("OAUTHBEARER",),
        "oauthbearer_jwks_endpoint_url": provider.jwks_url,
        "oauthbearer_expected_audience": (AUDIENCE,),
        "oauthbearer_expected_issuer": ISSUER,
    }


@pytest.fixture
def oauth_gateway(
    quota_tansu: Any, start_quota_gateway: Any, provider: IdentityProvider, tmp_path: Path
) -> Any:
    return start_quota_gateway(
        quota_tansu.bootstrap,
        quotas=WINDOWS,
        usage={"path": str(tmp_path / "usage")},
        security_protocol="SASL_PLAINTEXT",
        listener=_listener(provider),
        sasl=True,
    )


def _oidc(bootstrap: str, provider: IdentityProvider, client: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client,
        "sasl.oauthbearer.client.secret": SECRETS[client],
        "sasl.oauthbearer.token.endpoint.url": provider.token_url,
    }


def _handing(bootstrap: str, token: str) -> dict[str, Any]:
    """A client that presents ``token`` as it is (librdkafka sends what oauth_cb gives)."""

    def oauth_cb(_config: str) -> tuple[str, float]:
        return token, time.time() + 3600

    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }


def _gateway_log(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def _assert_no_secret(log: str, provider: IdentityProvider, *tokens: str) -> None:
    for secret in (*SECRETS.values(), *provider.issued, *tokens):
        assert secret not in log
    for token in (*provider.issued, *tokens):
        for section in token.split("."):
            assert section not in log  # nor any part of a token


def test_alice_is_held_to_her_user_quota_and_bob_is_not(
    oauth_gateway: Any,
    provider: IdentityProvider,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    oauth_gateway.runtime.alter_client_quotas(
        [Change({"user": "alice"}, "producer_byte_rate", float(QUOTA))], "test", "test"
    )
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_oidc(oauth_gateway.bootstrap, provider, "bob"))
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    configs = {who: _oidc(oauth_gateway.bootstrap, provider, who) for who in WHO}
    measured_from = race(configs, topic)
    oauth_gateway.stop()
    rows = usage_rows(tmp_path / "usage")
    assert_held(measured_rate(rows, "User:alice", measured_from), QUOTA)
    assert measured_rate(rows, "User:bob", measured_from) > 1.5 * QUOTA
    # ApiVersions, answered before authentication, is recorded without a principal.
    assert {r["principal"] for r in rows} - {""} == {"User:alice", "User:bob"}
    assert provider.issued, "librdkafka fetched no token from the endpoint"
    _assert_no_secret(_gateway_log(caplog), provider)


def _errors_of(config: dict[str, Any]) -> list[KafkaError]:
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": 3000})
    deadline = time.time() + 15
    while time.time() < deadline and not any(
        e.code() == KafkaError._AUTHENTICATION for e in errors
    ):
        producer.poll(0.2)
    producer.flush(0)
    return errors


REFUSED: dict[str, Callable[[IdentityProvider], str]] = {
    "expired": lambda p: p.mint("alice", issued_at=time.time() - 7200, expires_in=3600),
    "wrong audience": lambda p: p.mint("alice", audience="web"),
    "bad signature": lambda p: p.mint("alice", key=SigningKey(p.key.key_id)),
}


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_refused_tokens_are_an_authentication_error_at_the_client(
    oauth_gateway: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    why: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    token = REFUSED[why](provider)
    errors = _errors_of(_handing(oauth_gateway.bootstrap, token))
    refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert refused, [e.str() for e in errors]
    assert "invalid_token" in refused[0].str()
    log = _gateway_log(caplog)
    assert "oauthbearer_token_refused" in log
    _assert_no_secret(log, provider, token)


def test_a_valid_handed_token_is_accepted(
    oauth_gateway: Any, provider: IdentityProvider, caplog: pytest.LogCaptureFixture
) -> None:
    # The refusals above are the token's fault, not the oauth_cb path's.
    caplog.set_level(logging.INFO, logger="quotagate")
    producer = Producer(_handing(oauth_gateway.bootstrap, provider.mint("carol")))
    producer.produce(f"handed-{uuid.uuid4().hex[:6]}", b"x")
    assert producer.flush(15) == 0
    assert "as User:carol via OAUTHBEARER" in _gateway_log(caplog)
