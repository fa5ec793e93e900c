"""SASL passthrough inspection against hostile bytes: the token parsers and the inspector
never raise, never return more than they were given, and refuse every truncated frame.

Tokens are drawn near the shapes the parsers look for (PLAIN's NULs, SCRAM's client-first,
OAUTHBEARER's ``auth=Bearer`` with a JWT) as well as at random, then cut and flipped.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v1 as handshake_v1

from fuzz.budget import Budget, run_examples
from quotagate.gateway.auth.inspection import (
    INSPECTED_MECHANISMS,
    MAX_CLAIM_LENGTH,
    SaslInspector,
    principal_name,
)
from quotagate.protocol import codec
from quotagate.protocol.errors import ProtocolError
from quotagate.protocol.headers import parse_request_header

_TEXT = st.text(max_size=40)


def _jwt(data: st.DataObject) -> bytes:
    claims = data.draw(st.dictionaries(_TEXT, st.one_of(_TEXT, st.integers(), st.none())))
    if data.draw(st.booleans()):
        claims["sub"] = data.draw(_TEXT)
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=")
    return b"eyJhbGciOiJub25lIn0." + payload + b"." + data.draw(st.binary(max_size=20))


def token(data: st.DataObject) -> bytes:
    shape = data.draw(st.sampled_from(["plain", "scram", "oauth", "random"]))
    if shape == "plain":
        parts = data.draw(st.lists(st.binary(max_size=20), min_size=1, max_size=4))
        raw = b"\0".join(parts)
    elif shape == "scram":
        name = data.draw(_TEXT).encode("utf-8", "surrogatepass")
        raw = b"n,," + data.draw(st.sampled_from([b"", b"a=x,"])) + b"n=" + name + b",r=abc"
    elif shape == "oauth":
        raw = b"n,,\x01auth=Bearer " + _jwt(data) + b"\x01\x01"
    else:
        raw = data.draw(st.binary(max_size=300))
    if raw and data.draw(st.booleans()):
        cut = data.draw(st.integers(0, len(raw)))
        raw = raw[:cut]
    if raw and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([data.draw(st.integers(0, 255))]) + raw[at + 1 :]
    return raw


def test_token_parsers_never_raise(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        raw = token(data)
        for mechanism in INSPECTED_MECHANISMS:
            name = principal_name(mechanism, raw, data.draw(st.sampled_from(["sub", "", "x"])))
            assert name is None or 0 < len(name) <= min(len(raw), MAX_CLAIM_LENGTH)

    run_examples(body, max(budget.cases // 10, 200), budget, "sasl")


def _frames(data: st.DataObject) -> tuple[bytes, bytes]:
    mechanism = data.draw(st.sampled_from([*INSPECTED_MECHANISMS, "GSSAPI"]))
    handshake = codec.encode_request_frame(
        handshake_v1.SaslHandshakeRequest(mechanism=mechanism), 1, "fuzz"
    )
    authenticate = codec.encode_request_frame(
        authenticate_v2.SaslAuthenticateRequest(auth_bytes=token(data)), 2, "fuzz"
    )
    return handshake, authenticate


def _hostile(data: st.DataObject, frame: bytes) -> bytes:
    choice = data.draw(st.sampled_from(["whole", "cut", "flip", "lie"]))
    if choice == "cut":
        return frame[: data.draw(st.integers(0, len(frame)))]
    if choice == "flip":
        at = data.draw(st.integers(0, len(frame) - 1))
        return frame[:at] + bytes([data.draw(st.integers(0, 255))]) + frame[at + 1 :]
    if choice == "lie":
        # A length field anywhere in the body claims far more than the frame holds.
        at = data.draw(st.integers(4, max(4, len(frame) - 4)))
        return frame[:at] + b"\x7f\xff\xff\xff" + frame[at + 4 :]
    return frame


def _feed_request(inspector: SaslInspector, frame: bytes) -> Any:
    try:
        header = parse_request_header(frame)
    except ProtocolError:
        return None  # the connection refuses it before any inspection
    return inspector.request(header, frame)


def test_inspector_refuses_hostile_frames_without_raising(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        inspector = SaslInspector(data.draw(st.sampled_from(["sub", "client_id"])))
        handshake, authenticate = _frames(data)
        for frame in (_hostile(data, handshake), _hostile(data, authenticate)):
            verdict = _feed_request(inspector, frame)
            assert verdict is None or isinstance(verdict.close, bool)
        handshake_response = codec.encode_response_frame(
            handshake_v1.SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=()), 1
        )
        authenticate_response = codec.encode_response_frame(
            authenticate_v2.SaslAuthenticateResponse(
                error_code=data.draw(
                    st.sampled_from([ErrorCode.none, ErrorCode.sasl_authentication_failed])
                ),
                error_message=data.draw(st.one_of(st.none(), _TEXT)),
                auth_bytes=data.draw(st.binary(max_size=64)),
            ),
            2,
        )
        for api_key, version, frame in (
            (17, 1, _hostile(data, handshake_response)),
            (36, 2, _hostile(data, authenticate_response)),
        ):
            verdict = inspector.response(api_key, version, frame)
            if len(frame) < len(handshake_response if api_key == 17 else authenticate_response):
                assert verdict.close and verdict.principal is None
            if verdict.principal is not None:
                assert verdict.principal.startswith("User:")
                assert len(verdict.principal) <= len("User:") + MAX_CLAIM_LENGTH

    run_examples(body, max(budget.cases // 10, 200), budget, "sasl")
