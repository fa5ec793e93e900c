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
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from support.clients import authentication_error
from support.greedy import assert_alice_held_while_bob_runs_free
from support.oauth import REFUSED_TOKENS, IdentityProvider, handing_over

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


@pytest.fixture
def oauth_gateway(
    quota_tansu: Any, start_quota_gateway: Any, provider: IdentityProvider, tmp_path: Path
) -> Any:
    return start_quota_gateway(
        quota_tansu.bootstrap,
        quotas=WINDOWS,
        usage={"path": str(tmp_path / "usage")},
        security_protocol="SASL_PLAINTEXT",
        listener=provider.validating_listener(),
        sasl=True,
    )


def _gateway_log(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def test_alice_is_held_to_her_user_quota_and_bob_is_not(
    oauth_gateway: Any,
    provider: IdentityProvider,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    configs = {who: provider.client_config(oauth_gateway.bootstrap, who) for who in WHO}
    rows = assert_alice_held_while_bob_runs_free(
        oauth_gateway, configs, tmp_path / "usage", QUOTA, WINDOWS
    )
    # ApiVersions, answered before authentication, is recorded without a principal.
    # Requests before authentication (ApiVersions) name nobody and are not usage events.
    assert {r["principal"] for r in rows} == {"User:alice", "User:bob"}
    assert provider.issued, "librdkafka fetched no token from the endpoint"
    provider.assert_not_logged(_gateway_log(caplog))


@pytest.mark.parametrize("why", sorted(REFUSED_TOKENS))
def test_refused_tokens_are_an_authentication_error_at_the_client(
    oauth_gateway: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    wait_for: Callable[..., Any],
    why: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    token = REFUSED_TOKENS[why](provider)
    config = {**handing_over(oauth_gateway.bootstrap, token), "message.timeout.ms": 3000}
    assert "invalid_token" in authentication_error(config, wait_for, 15)
    log = _gateway_log(caplog)
    assert "event=authentication_failed" in log and "token refused: " in log
    provider.assert_not_logged(log, token)


def test_a_valid_handed_token_is_accepted(
    oauth_gateway: Any, provider: IdentityProvider, caplog: pytest.LogCaptureFixture
) -> None:
    # The refusals above are the token's fault, not the oauth_cb path's.
    caplog.set_level(logging.INFO, logger="quotagate")
    producer = Producer(handing_over(oauth_gateway.bootstrap, provider.mint("carol")))
    producer.produce(f"handed-{uuid.uuid4().hex[:6]}", b"x")
    assert producer.flush(15) == 0
    assert "as User:carol via OAUTHBEARER" in _gateway_log(caplog)
