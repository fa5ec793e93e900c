"""SASL passthrough inspection, pure: which principal each mechanism's tokens name, adopted
only after the upstream's success; refusals close; re-authentication starts over."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v1 as authenticate_v1
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1

from quotagate.gateway.auth.inspection import (
    SaslInspector,
    oauthbearer_name,
    plain_name,
    scram_name,
)
from quotagate.protocol import codec
from quotagate.protocol.headers import parse_request_header
from quotagate.security.oauthbearer_message import client_initial_response


def request(body: Any) -> tuple[Any, bytes]:
    frame = codec.encode_request_frame(body, 7, "client")
    return parse_request_header(frame), frame


def handshake(inspector: SaslInspector, mechanism: str, error: ErrorCode = ErrorCode.none) -> Any:
    header, frame = request(handshake_v1.SaslHandshakeRequest(mechanism=mechanism))
    assert not inspector.request(header, frame).close
    response = handshake_v1.SaslHandshakeResponse(error_code=error, mechanisms=(mechanism,))
    return inspector.response(17, 1, codec.encode_response_frame(response, 7))


def authenticate(
    inspector: SaslInspector,
    token: bytes,
    reply: bytes = b"",
    error: ErrorCode = ErrorCode.none,
    module: Any = authenticate_v2,
) -> Any:
    header, frame = request(module.SaslAuthenticateRequest(auth_bytes=token))
    assert not inspector.request(header, frame).close
    response = module.SaslAuthenticateResponse(
        error_code=error,
        error_message="Authentication failed: Invalid username or password" if error else None,
        auth_bytes=reply,
    )
    version = 2 if module is authenticate_v2 else 1
    return inspector.response(36, version, codec.encode_response_frame(response, 7))


def jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_plain_names_the_authorization_id_else_the_authentication_id() -> None:
    assert plain_name(b"\0alice\0pw") == "alice"
    assert plain_name(b"admin\0alice\0pw") == "admin"
    assert plain_name(b"alice\0pw") is None
    assert plain_name(b"\0\xff\0pw") is None


def test_scram_names_are_decoded() -> None:
    assert scram_name(b"n,,n=carol=2Cx=3Dy,r=abc") == "carol,x=y"
    assert scram_name(b"n,,n=bad=name,r=abc") is None
    assert scram_name(b"p=tls-unique,,n=a,r=b") == "a"  # the upstream refuses binding, not us


def test_oauthbearer_names_the_configured_claim() -> None:
    token = client_initial_response(jwt({"sub": "alice", "client_id": "svc-1"}))
    assert oauthbearer_name(token, "sub") == "alice"
    assert oauthbearer_name(token, "client_id") == "svc-1"
    assert oauthbearer_name(token, "missing") is None
    assert oauthbearer_name(client_initial_response("not-a-jwt"), "sub") is None
    assert oauthbearer_name(b"n,,\x01auth=Basic abc\x01\x01", "sub") is None


def test_principal_adopted_only_after_success() -> None:
    inspector = SaslInspector()
    assert handshake(inspector, "PLAIN").principal is None
    verdict = authenticate(inspector, b"\0alice\0pw")
    assert verdict.principal == "User:alice" and not verdict.close


def test_scram_waits_for_the_second_round() -> None:
    inspector = SaslInspector()
    handshake(inspector, "SCRAM-SHA-512")
    first = authenticate(inspector, b"n,,n=bob,r=nonce", reply=b"r=nonceX,s=c2FsdA==,i=4096")
    assert first.principal is None and not first.close
    final = authenticate(inspector, b"c=biws,r=nonceX,p=cHJvb2Y=", reply=b"v=c2ln")
    assert final.principal == "User:bob"


def test_a_refusal_closes_and_adopts_nothing() -> None:
    inspector = SaslInspector()
    handshake(inspector, "SCRAM-SHA-256")
    verdict = authenticate(
        inspector, b"n,,n=alice,r=nonce", error=ErrorCode.sasl_authentication_failed
    )
    assert verdict.close and verdict.principal is None
    assert "Invalid username or password" in verdict.reason


def test_an_oauthbearer_error_challenge_is_not_success() -> None:
    inspector = SaslInspector()
    handshake(inspector, "OAUTHBEARER")
    token = client_initial_response(jwt({"sub": "alice"}))
    challenge = authenticate(inspector, token, reply=b'{"status":"invalid_token"}')
    assert challenge.principal is None and not challenge.close
    refused = authenticate(inspector, b"\x01", error=ErrorCode.sasl_authentication_failed)
    assert refused.close and refused.principal is None
    again = SaslInspector()
    handshake(again, "OAUTHBEARER")
    assert authenticate(again, token).principal == "User:alice"


def test_reauthentication_inspects_again() -> None:
    inspector = SaslInspector()
    handshake(inspector, "PLAIN")
    assert authenticate(inspector, b"\0alice\0pw", module=authenticate_v1).principal == "User:alice"
    handshake(inspector, "PLAIN")
    assert authenticate(inspector, b"\0alice\0pw").principal == "User:alice"


def test_mechanism_refused_by_the_upstream_closes() -> None:
    assert handshake(SaslInspector(), "PLAIN", ErrorCode.unsupported_sasl_mechanism).close


@pytest.mark.parametrize(
    "body",
    [
        handshake_v0.SaslHandshakeRequest(mechanism="PLAIN"),  # bare tokens follow v0
        handshake_v1.SaslHandshakeRequest(mechanism="GSSAPI"),
        authenticate_v2.SaslAuthenticateRequest(auth_bytes=b"\0a\0b"),  # before any handshake
    ],
)
def test_what_cannot_be_inspected_is_refused(body: Any) -> None:
    header, frame = request(body)
    assert SaslInspector().request(header, frame).close


def test_a_success_without_a_readable_principal_closes() -> None:
    inspector = SaslInspector()
    handshake(inspector, "PLAIN")
    verdict = authenticate(inspector, b"no separators at all")
    assert verdict.close and verdict.principal is None


def test_truncated_frames_are_refused_not_read_past() -> None:
    inspector = SaslInspector()
    handshake(inspector, "PLAIN")
    header, frame = request(authenticate_v2.SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw"))
    assert inspector.request(header, frame[:-3]).close
    response = authenticate_v2.SaslAuthenticateResponse(
        error_code=ErrorCode.none, error_message=None, auth_bytes=b""
    )
    good = codec.encode_response_frame(response, 7)
    assert inspector.response(36, 2, good[:-2]).close


def test_oauthbearer_names_read_as_kafkas_validator_reads_them() -> None:
    """The claim as the upstream's KIP-768 validator would name the principal (trimmed,
    non-empty, a string), from a message in Kafka's client-first grammar only."""
    assert oauthbearer_name(client_initial_response(jwt({"sub": " alice\t"})), "sub") == "alice"
    assert oauthbearer_name(client_initial_response(jwt({"sub": "   "})), "sub") is None
    assert oauthbearer_name(client_initial_response(jwt({"sub": ["alice"]})), "sub") is None
    cut = client_initial_response(jwt({"sub": "alice"}))[:-1]  # no closing \x01
    assert oauthbearer_name(cut, "sub") is None
