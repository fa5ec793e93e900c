"""OAUTHBEARER terminated: SaslHandshake / SaslAuthenticate frames against a JWKS served by the
test on loopback, answered as Kafka's OAuthBearerSaslServer answers them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from quotagate.gateway.auth.authenticator import AuthContext
from quotagate.gateway.auth.jwks import JwksCache
from quotagate.gateway.auth.oauthbearer import JwksTokenValidator
from quotagate.gateway.auth.sasl import SaslAuthenticator, SaslAuthenticatorFactory
from quotagate.security.oauthbearer import TokenRules
from quotagate.store.credentials import CredentialStore
from support.oauth import AUDIENCE, ISSUER, IdentityProvider, SigningKey
from support.sasl_frames import authenticate, handshake

CONTEXT = AuthContext("OAUTH", "SASL_PLAINTEXT", "127.0.0.1", 1)
INVALID_TOKEN = b'{"status":"invalid_token"}'


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        yield served


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> CredentialStore:
    path: Path = tmp_path_factory.mktemp("oauth") / "gateway.db"
    return CredentialStore.open(path)


@pytest.fixture(scope="module")
def factory(provider: IdentityProvider, store: CredentialStore) -> SaslAuthenticatorFactory:
    keys = JwksCache(provider.jwks_url)
    keys.load()
    rules = TokenRules(expected_audience=(AUDIENCE,), expected_issuer=ISSUER)
    return SaslAuthenticatorFactory(
        store,
        ("OAUTHBEARER", "SCRAM-SHA-512"),
        listener_tokens={"OAUTH": JwksTokenValidator(keys, rules)},
    )


def client_first(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_a_valid_token_names_the_principal(
    factory: SaslAuthenticatorFactory, provider: IdentityProvider
) -> None:
    auth = factory(CONTEXT)
    _, body = handshake(auth, "OAUTHBEARER")
    assert body.error_code == ErrorCode.none
    assert set(body.mechanisms) == {"OAUTHBEARER", "SCRAM-SHA-512"}
    result, body = authenticate(auth, client_first(provider.mint("alice")), 2, 2)
    assert (body.error_code, body.auth_bytes, result.principal) == (
        ErrorCode.none,
        b"",
        "User:alice",
    )


def test_a_matching_authorization_id_is_accepted(
    factory: SaslAuthenticatorFactory, provider: IdentityProvider
) -> None:
    auth = factory(CONTEXT)
    handshake(auth, "OAUTHBEARER")
    result, _ = authenticate(auth, client_first(provider.mint("alice"), "alice"), 1, 2)
    assert result.principal == "User:alice"


@pytest.mark.parametrize(
    "why", ["expired", "wrong audience", "wrong issuer", "bad signature", "unknown key"]
)
def test_a_refused_token_gets_the_rfc7628_error_then_kafkas_failure(
    factory: SaslAuthenticatorFactory,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    why: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    token = {
        "expired": lambda: provider.mint("alice", expires_in=-3600),
        "wrong audience": lambda: provider.mint("alice", audience="web"),
        "wrong issuer": lambda: provider.mint("alice", issuer="https://evil"),
        "bad signature": lambda: provider.mint("alice", key=SigningKey(provider.key.key_id)),
        "unknown key": lambda: provider.mint("alice", key=SigningKey()),
    }[why]()
    auth = factory(CONTEXT)
    handshake(auth, "OAUTHBEARER")
    result, body = authenticate(auth, client_first(token), 2, 2)
    assert (body.error_code, body.auth_bytes, result.principal, result.close) == (
        ErrorCode.none,
        INVALID_TOKEN,
        None,
        False,
    )
    result, body = authenticate(auth, b"\x01", 2, 3)
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == INVALID_TOKEN.decode()
    assert result.close
    # Why goes to the connection's refusal line (gateway/refusals.py); the token never does.
    assert result.refusal is not None
    assert result.refusal.reason == "sasl_authentication_failed"
    assert result.refusal.mechanism == "OAUTHBEARER"
    assert result.refusal.detail.startswith("token refused: ")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for part in token.split("."):
        assert part not in logged and part not in result.refusal.detail


def test_an_authorization_id_other_than_the_subject_is_refused(
    factory: SaslAuthenticatorFactory, provider: IdentityProvider
) -> None:
    auth = factory(CONTEXT)
    handshake(auth, "OAUTHBEARER")
    result, body = authenticate(auth, client_first(provider.mint("alice"), "bob"), 2, 2)
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == (
        "Authentication failed: Client requested an authorization id (bob) that is different "
        "from the token's principal name (alice)"
    )
    assert result.close


@pytest.mark.parametrize(
    "message", [b"", b"\x01", b"n,,\x01\x01", b"n,,\x01auth=Basic x\x01\x01", b"\xff" * 64]
)
def test_a_malformed_client_message_fails_with_the_generic_message(
    factory: SaslAuthenticatorFactory, message: bytes
) -> None:
    auth = factory(CONTEXT)
    handshake(auth, "OAUTHBEARER")
    result, body = authenticate(auth, message, 2, 2)
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )
    assert result.close


def test_oauthbearer_is_not_offered_on_a_listener_without_a_jwks(
    factory: SaslAuthenticatorFactory,
) -> None:
    auth: SaslAuthenticator = factory(AuthContext("OTHER", "SASL_PLAINTEXT", "127.0.0.1", 1))
    result, body = handshake(auth, "OAUTHBEARER")
    assert body.error_code == ErrorCode.unsupported_sasl_mechanism
    assert result.close
