"""The four listener authenticators' rules, without sockets: what a connection hands to the
stages, answers, forwards or closes on, in each state of its authentication."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1

from quotagate.gateway.auth.authenticator import (
    ANONYMOUS,
    SASL_PROTOCOL_ERROR,
    AuthContext,
    AuthResult,
)
from quotagate.gateway.auth.listener import (
    FORWARD,
    RAW_TOKEN,
    Anonymous,
    Certificate,
    Close,
    Passthrough,
    Terminate,
    listener_authenticators,
)
from quotagate.gateway.auth.sasl import SaslAuthenticator
from quotagate.gateway.config import SASL_PASSTHROUGH, ListenerConfig
from quotagate.gateway.refusals import CERTIFICATE_UNMAPPED
from quotagate.gateway.stages.exchange import ConnectionInfo
from quotagate.protocol import codec
from quotagate.protocol.headers import RequestHeader, parse_request_header
from quotagate.protocol.host_port import HostPort
from quotagate.security.principal import PrincipalBuilder
from quotagate.security.principal_mapping import PrincipalMapper
from quotagate.security.protocol import SecurityProtocol
from quotagate.store.credentials import CredentialStore
from support.certificates import CertificateAuthority

INFO = ConnectionInfo(7, "L", SecurityProtocol.SASL_PLAINTEXT, "127.0.0.1", 5000, None)


def no_certificate() -> bytes | None:
    return None


def request(body: Any) -> tuple[RequestHeader, bytes]:
    frame = codec.encode_request_frame(body, 3, "client")
    return parse_request_header(frame), frame


METADATA = request(
    metadata_v12.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
)
HANDSHAKE = request(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN"))


def plain(password: str) -> tuple[RequestHeader, bytes]:
    token = f"\0alice\0{password}".encode()
    return request(authenticate_v2.SaslAuthenticateRequest(auth_bytes=token))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> CredentialStore:
    store = CredentialStore.open(tmp_path_factory.mktemp("listener-auth") / "gateway.db")
    store.set_password("alice", "alice-secret", iterations=4096)
    return store


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def terminate(store: CredentialStore, clock: Clock, max_reauth_ms: int = 0) -> Terminate:
    def factory(context: AuthContext) -> SaslAuthenticator:
        return SaslAuthenticator(
            context, store, ("PLAIN",), b"decoy", max_reauth_ms=max_reauth_ms, clock=clock
        )

    auth = Terminate(factory, max_reauth_ms)
    assert auth.on_connect(INFO, no_certificate) is None
    return auth


def test_anonymous_names_every_client_and_looks_at_no_request() -> None:
    auth = Anonymous()
    assert auth.on_connect(INFO, no_certificate) == ANONYMOUS
    assert not auth.watches_requests and not auth.watches_responses
    assert auth.on_request(*METADATA) is None


def test_a_certificate_names_the_client_and_one_no_rule_maps_is_refused(
    tmp_path: Path,
) -> None:
    issued = CertificateAuthority(tmp_path).client("CN=alice,O=corp", "alice")
    mapped = Certificate(PrincipalBuilder(PrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$1/")))
    assert mapped.on_connect(INFO, lambda: issued.der) == "User:alice"
    assert not mapped.watches_requests

    strict = Certificate(PrincipalBuilder(PrincipalMapper.from_rules("RULE:^CN=bob,.*$/bob/")))
    refused = strict.on_connect(INFO, lambda: issued.der)
    assert isinstance(refused, Close)
    assert refused.refusal is not None and refused.refusal.reason == CERTIFICATE_UNMAPPED
    assert refused.event == "certificate_refused"


def test_a_sasl_listener_without_a_credential_store_closes_each_connection() -> None:
    closed = Terminate(None, None).on_connect(INFO, no_certificate)
    assert isinstance(closed, Close) and closed.refusal is None


def test_terminate_answers_every_request_until_authenticated_then_only_sasl(
    store: CredentialStore,
) -> None:
    auth = terminate(store, Clock())
    handshake = auth.on_request(*HANDSHAKE)
    assert isinstance(handshake, AuthResult) and handshake.principal is None
    done = auth.on_request(*plain("alice-secret"))
    assert isinstance(done, AuthResult) and done.principal == "User:alice"
    assert auth.on_request(*METADATA) is None  # to the stages
    again = auth.on_request(*HANDSHAKE)  # KIP-368: a re-authentication begins
    assert isinstance(again, AuthResult) and not again.close


def test_terminate_refuses_a_request_before_authentication(store: CredentialStore) -> None:
    refused = terminate(store, Clock()).on_request(*METADATA)
    assert isinstance(refused, AuthResult) and refused.close


def test_terminate_refuses_a_wrong_password(store: CredentialStore) -> None:
    auth = terminate(store, Clock())
    auth.on_request(*HANDSHAKE)
    refused = auth.on_request(*plain("wrong"))
    assert isinstance(refused, AuthResult) and refused.close and refused.refusal is not None


def test_terminate_closes_an_expired_session_on_its_next_request(store: CredentialStore) -> None:
    clock = Clock()
    auth = terminate(store, clock, max_reauth_ms=1000)
    auth.on_request(*HANDSHAKE)
    auth.on_request(*plain("alice-secret"))
    assert auth.on_request(*METADATA) is None
    clock.now += 2.0
    expired = auth.on_request(*METADATA)
    assert isinstance(expired, Close) and "SASL session expired" in expired.reason


def test_terminate_takes_bare_tokens_after_a_version_0_handshake(store: CredentialStore) -> None:
    auth = terminate(store, Clock())
    assert not auth.expects_raw_tokens
    auth.on_request(*request(handshake_v0.SaslHandshakeRequest(mechanism="PLAIN")))
    assert auth.expects_raw_tokens
    done = auth.on_request(RAW_TOKEN, b"\0\0\0\0" + b"\0alice\0alice-secret")
    assert isinstance(done, AuthResult) and done.principal == "User:alice"


def passthrough() -> Passthrough:
    auth = Passthrough("sub")
    assert auth.on_connect(INFO, no_certificate) is None
    return auth


def answer(auth: Passthrough, header: RequestHeader, body: Any) -> AuthResult | None:
    return auth.on_response(header, codec.encode_response_frame(body, 3))


def test_passthrough_forwards_sasl_and_adopts_the_name_on_the_upstreams_success() -> None:
    auth = passthrough()
    assert auth.watches_requests and auth.watches_responses
    assert auth.on_request(*HANDSHAKE) is FORWARD
    accepted = handshake_v1.SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=("PLAIN",))
    shaken = answer(auth, HANDSHAKE[0], accepted)
    assert shaken is not None and shaken.principal is None and shaken.response is None
    header, frame = plain("anything")
    assert auth.on_request(header, frame) is FORWARD
    success = authenticate_v2.SaslAuthenticateResponse(
        error_code=ErrorCode.none, error_message=None, auth_bytes=b""
    )
    done = answer(auth, header, success)
    assert done is not None and done.principal == "User:alice" and not done.close
    assert auth.on_request(*METADATA) is None  # authenticated: to the stages
    assert auth.on_response(METADATA[0], b"") is None  # only SASL answers are read


def test_passthrough_closes_on_anything_but_sasl_before_authentication() -> None:
    refused = passthrough().on_request(*METADATA)
    assert isinstance(refused, Close)
    assert refused.refusal is not None and refused.refusal.reason == SASL_PROTOCOL_ERROR


def test_passthrough_closes_after_the_upstreams_refusal() -> None:
    auth = passthrough()
    auth.on_request(*HANDSHAKE)
    header, frame = plain("wrong")
    auth.on_request(header, frame)
    failed = authenticate_v2.SaslAuthenticateResponse(
        error_code=ErrorCode.sasl_authentication_failed,
        error_message="Authentication failed",
        auth_bytes=b"",
    )
    refused = answer(auth, header, failed)
    assert refused is not None and refused.close and refused.refusal is not None
    assert auth.on_request(*METADATA) is not None  # still not authenticated


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({}, Anonymous),
        ({"security_protocol": SecurityProtocol.SASL_PLAINTEXT}, Terminate),
        (
            {"security_protocol": SecurityProtocol.SASL_PLAINTEXT, "sasl_mode": SASL_PASSTHROUGH},
            Passthrough,
        ),
    ],
)
def test_one_kind_is_chosen_per_listener(fields: dict[str, Any], kind: type) -> None:
    listener = ListenerConfig("L", HostPort("127.0.0.1", 9092), **fields)
    authenticators = listener_authenticators(listener, None, None)
    assert isinstance(authenticators(), kind)


def test_a_listener_verifying_certificates_chooses_the_certificate_kind() -> None:
    listener = ListenerConfig("L", HostPort("127.0.0.1", 9092), SecurityProtocol.SSL)
    authenticators = listener_authenticators(listener, None, PrincipalBuilder())
    assert isinstance(authenticators(), Certificate)
