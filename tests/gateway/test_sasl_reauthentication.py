"""KIP-368 on the terminating side: the session lifetime a SaslAuthenticate answer carries, a
re-authentication on the same connection, and the expired session. Frames built and read with
kio; the authenticator's clocks are the test's, so nothing here depends on timing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from quotagate.gateway.auth.authenticator import AuthContext
from quotagate.gateway.auth.jwks import JwksCache
from quotagate.gateway.auth.oauthbearer import JwksTokenValidator
from quotagate.gateway.auth.sasl import SaslAuthenticator
from quotagate.security.oauthbearer import TokenRules
from quotagate.store.credentials import CredentialStore
from support.oauth import AUDIENCE, ISSUER, IdentityProvider
from support.sasl_frames import authenticate, handshake

CONTEXT = AuthContext("SASL", "SASL_PLAINTEXT", "127.0.0.1", 1)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER")


class Clock:
    """The authenticator's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> CredentialStore:
    path: Path = tmp_path_factory.mktemp("reauth") / "gateway.db"
    store = CredentialStore.open(path)
    store.set_password("alice", "alice-secret", iterations=4096)
    store.set_password("bob", "bob-secret", iterations=4096)
    return store


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        yield served


@pytest.fixture(scope="module")
def validator(provider: IdentityProvider) -> JwksTokenValidator:
    keys = JwksCache(provider.jwks_url)
    keys.load()
    return JwksTokenValidator(
        keys, TokenRules(expected_audience=(AUDIENCE,), expected_issuer=ISSUER)
    )


def authenticator(
    store: CredentialStore,
    clock: Clock,
    max_reauth_ms: int = 1500,
    validator: JwksTokenValidator | None = None,
    wall_ms: int = 0,
) -> SaslAuthenticator:
    return SaslAuthenticator(
        CONTEXT, store, MECHANISMS, b"decoy" * 8, validator, max_reauth_ms, clock, lambda: wall_ms
    )


def plain(auth: SaslAuthenticator, user: str, version: int = 2) -> Any:
    handshake(auth, "PLAIN")
    return authenticate(auth, f"\0{user}\0{user}-secret".encode(), version, 2)


@pytest.mark.parametrize("max_reauth_ms", [0, 1500])
def test_the_session_lifetime_is_connections_max_reauth_ms(
    store: CredentialStore, max_reauth_ms: int
) -> None:
    clock = Clock()
    auth = authenticator(store, clock, max_reauth_ms)
    result, body = plain(auth, "alice")
    assert result.principal == "User:alice"
    assert body.session_lifetime.total_seconds() * 1000 == max_reauth_ms
    clock.now += 3600
    assert auth.session_expired() is (max_reauth_ms > 0)


def test_v0_answers_carry_no_lifetime_but_the_session_still_expires(
    store: CredentialStore,
) -> None:
    clock = Clock()
    auth = authenticator(store, clock)
    result, body = plain(auth, "alice", version=0)
    assert result.principal == "User:alice"
    assert not hasattr(body, "session_lifetime")
    clock.now += 1.4
    assert not auth.session_expired()
    clock.now += 0.2
    assert auth.session_expired()


def test_reauthentication_as_the_same_principal_renews_the_session(
    store: CredentialStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    auth = authenticator(store, clock)
    plain(auth, "alice")
    clock.now += 1.6
    assert auth.session_expired()
    with caplog.at_level("INFO"):
        result, body = plain(auth, "alice")
    assert body.error_code == ErrorCode.none
    assert body.session_lifetime.total_seconds() == 1.5
    assert result.principal == "User:alice" and not result.close
    assert not auth.session_expired() and not auth.reauthenticating
    assert "re-authenticated as User:alice via PLAIN" in caplog.text


def test_a_reauthentication_in_progress_takes_every_request(store: CredentialStore) -> None:
    clock = Clock()
    auth = authenticator(store, clock)
    plain(auth, "alice")
    clock.now += 1.2
    handshake(auth, "PLAIN")
    assert auth.reauthenticating


def test_reauthentication_as_another_principal_fails_and_closes(store: CredentialStore) -> None:
    clock = Clock()
    auth = authenticator(store, clock)
    plain(auth, "alice")
    clock.now += 1.2
    result, body = plain(auth, "bob")
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert result.close and result.principal is None


def test_reauthentication_with_another_mechanism_fails_at_authenticate(
    store: CredentialStore,
) -> None:
    clock = Clock()
    auth = authenticator(store, clock)
    plain(auth, "alice")
    clock.now += 1.2
    result, body = handshake(auth, "SCRAM-SHA-256")
    assert body.error_code == ErrorCode.none and not result.close  # as Kafka: accepted here
    result, body = authenticate(auth, b"n,,n=alice,r=abc", 2, 2)
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert body.error_message == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )
    assert result.close


def test_at_most_one_reauthentication_start_a_second(store: CredentialStore) -> None:
    clock = Clock()
    auth = authenticator(store, clock)
    plain(auth, "alice")
    clock.now += 0.1
    plain(auth, "alice")  # the first re-authentication may come at any time
    clock.now += 0.5
    result, body = handshake(auth, "PLAIN")
    assert body.error_code == ErrorCode.illegal_sasl_state and not result.close
    clock.now += 0.5
    _, body = plain(auth, "alice")
    assert body.error_code == ErrorCode.none


def test_without_reauth_ms_a_second_handshake_stays_illegal(store: CredentialStore) -> None:
    auth = authenticator(store, Clock(), max_reauth_ms=0)
    plain(auth, "alice")
    result, body = handshake(auth, "PLAIN")
    assert body.error_code == ErrorCode.illegal_sasl_state and not result.close


@pytest.mark.parametrize(("expires_in", "expected_ms"), [(1, 1000), (60, 1500)])
def test_an_oauthbearer_session_ends_with_its_token(
    store: CredentialStore,
    provider: IdentityProvider,
    validator: JwksTokenValidator,
    expires_in: int,
    expected_ms: int,
) -> None:
    issued = float(int(time.time()))
    token = provider.mint("alice", issued_at=issued, expires_in=expires_in + 5)
    # The authenticator's wall clock stands 5 s after issue: the token has expires_in left.
    auth = authenticator(store, Clock(), 1500, validator, wall_ms=int(issued + 5) * 1000)
    handshake(auth, "OAUTHBEARER")
    message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    result, body = authenticate(auth, message, 2, 2)
    assert result.principal == "User:alice"
    assert body.session_lifetime.total_seconds() * 1000 == expected_ms


def test_a_handshake_v0_session_expires_too(store: CredentialStore) -> None:
    # Pre-KIP-152 clients get no lifetime (bare tokens); Kafka closes them at expiry.
    clock = Clock()
    auth = authenticator(store, clock)
    handshake(auth, "PLAIN", version=0)
    assert auth.handle_token(b"\0alice\0alice-secret").principal == "User:alice"
    clock.now += 1.6
    assert auth.session_expired()
