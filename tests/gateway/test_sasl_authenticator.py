"""SaslHandshake / SaslAuthenticate on the wire, with frames built and parsed by kio."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.net.sasl.scram import ScramClient
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v1 as handshake_v1

from quotagate.gateway.auth.authenticator import AuthContext, AuthResult, Refusal
from quotagate.gateway.auth.sasl import SaslAuthenticator, SaslAuthenticatorFactory
from quotagate.store.credentials import CredentialStore
from support.sasl_frames import authenticate, handshake, request

ALL = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CONTEXT = AuthContext(
    listener="SASL", security_protocol="SASL_PLAINTEXT", peer_host="127.0.0.1", peer_port=1
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> CredentialStore:
    path: Path = tmp_path_factory.mktemp("sasl") / "gateway.db"
    store = CredentialStore.open(path)
    store.set_password("alice", "alice-secret", iterations=4096)
    return store


def authenticator(store: CredentialStore, mechanisms: tuple[str, ...] = ALL) -> SaslAuthenticator:
    return SaslAuthenticatorFactory(store, mechanisms)(CONTEXT)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_success(store: CredentialStore, version: int) -> None:
    auth = authenticator(store)
    result, body = handshake(auth, "PLAIN")
    assert body.error_code == ErrorCode.none
    assert set(body.mechanisms) == set(ALL)
    assert result.principal is None and not result.close

    result, body = authenticate(auth, b"\x00alice\x00alice-secret", version, 2)
    assert body.error_code == ErrorCode.none and body.error_message is None
    assert body.auth_bytes == b""
    assert result.principal == "User:alice" and not result.close


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 2])
def test_scram_success(store: CredentialStore, mechanism: str, version: int) -> None:
    auth = authenticator(store)
    handshake(auth, mechanism)
    client = ScramClient("alice", "alice-secret", mechanism)
    result, body = authenticate(auth, client.first_message(), version, 2)
    assert body.error_code == ErrorCode.none and result.principal is None
    client.process_server_first_message(body.auth_bytes)
    result, body = authenticate(auth, client.final_message(), version, 3)
    assert body.error_code == ErrorCode.none
    client.process_server_final_message(body.auth_bytes)
    assert result.principal == "User:alice" and not result.close


@pytest.mark.parametrize("mechanism", ALL)
def test_wrong_password_is_error_58_then_close(store: CredentialStore, mechanism: str) -> None:
    auth = authenticator(store)
    handshake(auth, mechanism)
    if mechanism == "PLAIN":
        result, body = authenticate(auth, b"\x00alice\x00wrong", 2, 2)
        assert body.error_message == "Authentication failed: Invalid username or password"
    else:
        client = ScramClient("alice", "wrong", mechanism)
        _, first = authenticate(auth, client.first_message(), 2, 2)
        client.process_server_first_message(first.auth_bytes)
        result, body = authenticate(auth, client.final_message(), 2, 3)
        assert body.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL"
            f" mechanism {mechanism}"
        )
    assert body.error_code == ErrorCode.sasl_authentication_failed
    assert result.close and result.principal is None
    # Whatever the client sends next, the connection is done.
    assert auth.handle(*request(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN"), 9)).close


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(store: CredentialStore) -> None:
    auth = authenticator(store, ("SCRAM-SHA-512", "PLAIN"))
    result, body = handshake(auth, "SCRAM-SHA-256")
    assert body.error_code == ErrorCode.unsupported_sasl_mechanism
    assert body.mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert result.close


def test_requests_before_the_handshake_close_without_a_response(store: CredentialStore) -> None:
    metadata = metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    result = authenticator(store).handle(*request(metadata, 1))
    assert result == AuthResult(None, close=True, refusal=_protocol("api_key=3"))
    early = authenticate_v2.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret")
    result = authenticator(store).handle(*request(early, 1))
    assert result == AuthResult(None, close=True, refusal=_protocol("api_key=36"))


def test_other_requests_during_the_exchange_close(store: CredentialStore) -> None:
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    metadata = metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert auth.handle(*request(metadata, 2)).close
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    result, body = handshake(auth, "PLAIN")
    assert body.error_code == ErrorCode.illegal_sasl_state and result.close


def test_after_success_sasl_requests_get_illegal_sasl_state_and_the_connection_stays(
    store: CredentialStore,
) -> None:
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    authenticate(auth, b"\x00alice\x00alice-secret", 2, 2)
    result, body = handshake(auth, "PLAIN")
    assert body.error_code == ErrorCode.illegal_sasl_state and not result.close
    result, body = authenticate(auth, b"\x00alice\x00alice-secret", 1, 4)
    assert body.error_code == ErrorCode.illegal_sasl_state and not result.close
    assert body.error_message == "SaslAuthenticate request received after successful authentication"
    assert result.principal is None


def test_handshake_v0_switches_to_bare_tokens(store: CredentialStore) -> None:
    auth = authenticator(store)
    assert not auth.expects_raw_tokens
    _, body = handshake(auth, "SCRAM-SHA-256", version=0)
    assert body.error_code == ErrorCode.none
    assert auth.expects_raw_tokens
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    result = auth.handle_token(client.first_message())
    assert result.response is not None and result.principal is None
    client.process_server_first_message(result.response[4:])
    result = auth.handle_token(client.final_message())
    assert result.response is not None
    assert struct.unpack(">i", result.response[:4])[0] == len(result.response) - 4
    client.process_server_final_message(result.response[4:])
    assert result.principal == "User:alice"
    assert not auth.expects_raw_tokens


def test_bare_token_failure_just_closes(store: CredentialStore) -> None:
    auth = authenticator(store)
    handshake(auth, "PLAIN", version=0)
    assert auth.handle_token(b"\x00alice\x00wrong") == AuthResult(
        None,
        close=True,
        refusal=Refusal(
            "sasl_authentication_failed",
            "Authentication failed: Invalid username or password",
            "PLAIN",
        ),
    )
    plain_ok = authenticator(store)
    handshake(plain_ok, "PLAIN", version=0)
    result = plain_ok.handle_token(b"\x00alice\x00alice-secret")
    assert result == AuthResult(b"\x00\x00\x00\x00", principal="User:alice")


@pytest.mark.parametrize("cut", [1, 5, 12])
def test_truncated_or_padded_frames_close(store: CredentialStore, cut: int) -> None:
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    key, version, cid, frame = request(
        authenticate_v2.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"), 2
    )
    result = auth.handle(key, version, cid, frame[:-cut])
    assert (result.response, result.close) == (None, True)
    assert result.refusal == Refusal(
        "sasl_protocol_error", "malformed SaslAuthenticate request", "PLAIN"
    )
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    assert auth.handle(key, version, cid, frame + b"\x00" * cut).close


def test_unknown_versions_close(store: CredentialStore) -> None:
    auth = authenticator(store)
    key, _, cid, frame = request(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert auth.handle(key, 2, cid, frame) == AuthResult(
        None,
        close=True,
        refusal=Refusal("sasl_protocol_error", "unsupported SaslHandshake version 2"),
    )
    auth = authenticator(store)
    handshake(auth, "PLAIN")
    key, _, cid, frame = request(authenticate_v2.SaslAuthenticateRequest(auth_bytes=b"x"), 2)
    assert auth.handle(key, 3, cid, frame) == AuthResult(
        None,
        close=True,
        refusal=Refusal("sasl_protocol_error", "unsupported SaslAuthenticate version 3", "PLAIN"),
    )


def _protocol(api: str) -> Refusal:
    return Refusal("sasl_protocol_error", f"unexpected request {api} during SASL handshake")


def test_factory_validates_mechanisms(store: CredentialStore) -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslAuthenticatorFactory(store, ["GSSAPI"])
    with pytest.raises(ValueError):
        SaslAuthenticatorFactory(store, [])
    factory = SaslAuthenticatorFactory(store, ["PLAIN", "PLAIN"], {"SECURE": ["SCRAM-SHA-512"]})
    assert factory.mechanisms("ANY") == ("PLAIN",)
    assert factory.mechanisms("SECURE") == ("SCRAM-SHA-512",)
    secure = factory(AuthContext("SECURE", "SASL_SSL", "127.0.0.1", 1))
    _, body = handshake(secure, "PLAIN")
    assert body.error_code == ErrorCode.unsupported_sasl_mechanism
    assert body.mechanisms == ("SCRAM-SHA-512",)
