"""SaslHandshake and SaslAuthenticate frames for an Authenticator, built and read with kio."""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.schema.sasl_authenticate import v0 as authenticate_v0
from kio.schema.sasl_authenticate import v1 as authenticate_v1
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from quotagate.gateway.auth.authenticator import AuthResult
from quotagate.gateway.auth.sasl import SaslAuthenticator

AUTHENTICATE = {0: authenticate_v0, 1: authenticate_v1, 2: authenticate_v2}
HANDSHAKE = {0: handshake_v0, 1: handshake_v1}


def request(body: Any, correlation_id: int) -> tuple[int, int, int, bytes]:
    header_type = type(body).__header_schema__
    buffer = io.BytesIO()
    header = header_type(
        request_api_key=type(body).__api_key__,
        request_api_version=type(body).__version__,
        correlation_id=i32(correlation_id),
        client_id="test",
    )
    entity_writer(header_type)(buffer, header)
    entity_writer(type(body))(buffer, body)
    api_key, version = int(type(body).__api_key__), int(type(body).__version__)
    return api_key, version, correlation_id, buffer.getvalue()


def response(result: AuthResult, response_type: Any, correlation_id: int) -> Any:
    assert result.response is not None
    (size,) = struct.unpack(">i", result.response[:4])
    payload = result.response[4:]
    assert size == len(payload)
    header, offset = entity_reader(response_type.__header_schema__)(payload, 0)
    assert header.correlation_id == correlation_id
    body, used = entity_reader(response_type)(payload, offset)
    assert offset + used == len(payload)
    return body


def handshake(auth: SaslAuthenticator, mechanism: str, version: int = 1) -> Any:
    module = HANDSHAKE[version]
    result = auth.handle(*request(module.SaslHandshakeRequest(mechanism=mechanism), 1))
    return result, response(result, module.SaslHandshakeResponse, 1)


def authenticate(auth: SaslAuthenticator, token: bytes, version: int, cid: int) -> Any:
    module = AUTHENTICATE[version]
    result = auth.handle(*request(module.SaslAuthenticateRequest(auth_bytes=token), cid))
    return result, response(result, module.SaslAuthenticateResponse, cid)
