"""The OAUTHBEARER client-first message (RFC 7628 with KIP-342 extensions), fuzzed.

The parser sees every message a client can send before it has authenticated, so it must be
total: well-formed messages drawn from the grammar give back exactly what was put in; every
truncation, byte change and splice of them gives a result or ``InvalidClientFirstError``,
nothing else. Then hostile SaslAuthenticate payloads go to a real gateway's OAUTHBEARER
listener, one connection each: each ends with Kafka's failure or the error challenge, never
a traceback, and a bystander connection opened first is still answered after them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v1 as handshake_v1

from fuzz.budget import Budget, expired, run_examples
from fuzz.cases import Bystander
from quotagate.gateway.auth.setup import authenticator_factory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol import codec
from quotagate.security.oauthbearer_message import (
    ClientFirst,
    InvalidClientFirstError,
    parse_client_first,
)
from support.gateways import gateway_config
from support.oauth import IdentityProvider

FIXED_SEED = 7628

_SASLNAME = st.lists(
    st.one_of(
        st.sampled_from([chr(c) for c in range(1, 128) if chr(c) not in ",="]),
        st.sampled_from(["=2C", "=3D"]),
    ),
    min_size=1,
    max_size=12,
).map("".join)
_KEY = st.text(st.sampled_from("abcXYZqr"), min_size=1, max_size=8).filter(lambda k: k != "auth")
_VALUE = st.text(
    st.sampled_from([chr(c) for c in range(0x21, 0x7F)] + [" ", "\t", "\r", "\n"]),
    min_size=1,
    max_size=20,
)
_TOKEN = st.builds(
    lambda body, pad: body + "=" * pad,
    st.text(st.sampled_from("-_~+/.abcXYZ019"), min_size=1, max_size=40),
    st.integers(0, 2),
)


def _message(authzid: str, pairs: list[tuple[str, str]], scheme: str, token: str) -> bytes:
    kv = "".join(f"{key}={value}\x01" for key, value in pairs)
    return f"n,{'a=' + authzid if authzid else ''},\x01{kv}auth={scheme} {token}\x01\x01".encode()


def _damaged(message: bytes, rng: random.Random) -> Iterator[bytes]:
    yield from (message[:cut] for cut in range(len(message)))
    for _ in range(8):
        changed = bytearray(message)
        for _ in range(rng.randint(1, 3)):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        yield bytes(changed)
    yield message + message
    yield message.replace(b"\x01", b"")
    yield message.replace(b"=", b"=" * 1000)


def test_messages_from_the_grammar_round_trip_and_damage_is_refused(budget: Budget) -> None:
    rng = random.Random(None if budget.fuzzing else FIXED_SEED)

    def body(data: st.DataObject) -> None:
        authzid = data.draw(st.one_of(st.just(""), _SASLNAME))
        pairs = data.draw(st.lists(st.tuples(_KEY, _VALUE), max_size=4))
        scheme = data.draw(st.sampled_from(["Bearer", "bearer", "BEARER"]))
        token = data.draw(_TOKEN)
        message = _message(authzid, pairs, scheme, token)
        assert parse_client_first(message) == ClientFirst(token, authzid, dict(pairs))
        for damaged in _damaged(message, rng):
            try:
                parsed = parse_client_first(damaged)
            except InvalidClientFirstError:
                continue
            assert isinstance(parsed, ClientFirst)

    run_examples(body, max(budget.round_trip_examples * 50, 100), budget, "oauthbearer")


def test_random_bytes_are_refused_or_read(budget: Budget) -> None:
    rng = random.Random(None if budget.fuzzing else FIXED_SEED)
    deadline = budget.deadline("oauthbearer")
    alphabet = b"n,a=\x01auth Bearer=2C3Dxyz"
    for _ in range(budget.cases * 4):
        if expired(deadline):
            break
        size = rng.randrange(64)
        if rng.random() < 0.5:
            data = bytes(rng.choice(alphabet) for _ in range(size))
        else:
            data = rng.randbytes(size)
        with contextlib.suppress(InvalidClientFirstError):
            assert isinstance(parse_client_first(data), ClientFirst)


def _frame(request: Any, correlation_id: int) -> bytes:
    return codec.encode_request_frame(request, correlation_id, "fuzz")


def _read_frame(sock: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data


def _hostile_exchange(address: tuple[str, int], payload: bytes) -> int | None:
    """Handshake, then ``payload`` as the token: the SaslAuthenticate error code, or None."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(_frame(handshake_v1.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1))
        if _read_frame(sock) is None:
            return None
        sock.sendall(_frame(authenticate_v2.SaslAuthenticateRequest(auth_bytes=payload), 2))
        frame = _read_frame(sock)
        if frame is None:
            return None
        response = codec.decode_response(frame, 36, 2)
        return int(response.error_code)


@pytest.mark.integration
def test_hostile_tokens_close_one_connection_each(
    budget: Budget,
    tansu: TansuBroker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    rng = random.Random(None if budget.fuzzing else FIXED_SEED)
    with IdentityProvider().serving() as provider:
        config = gateway_config(
            tansu.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            listener={
                "sasl_enabled_mechanisms": ("OAUTHBEARER",),
                "oauthbearer_jwks_endpoint_url": provider.jwks_url,
            },
            store_path=str(tmp_path / "quotagate.db"),
        )
        factory = authenticator_factory(config)
        assert factory is not None
        gateway = BackgroundGateway(config, authenticator_factory=factory)
        gateway.start()
        try:
            outcomes = _fuzz_listener(gateway, provider, budget, rng)
        finally:
            gateway.stop()
            factory.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors[:3]]
    assert outcomes.get(ErrorCode.sasl_authentication_failed, 0) > 0, outcomes


def _fuzz_listener(
    gateway: BackgroundGateway, provider: IdentityProvider, budget: Budget, rng: random.Random
) -> dict[int | None, int]:
    deadline = budget.deadline("oauthbearer")
    address = (gateway.bootstrap.host, gateway.bootstrap.port)
    bystander = Bystander(address)
    valid = _message("", [("x", "y")], "Bearer", provider.mint("alice", audience=None))
    outcomes: dict[int | None, int] = {}
    for case in range(min(budget.cases, 2000)):
        if expired(deadline):
            break
        source = valid if case % 2 else _message("a", [], "Bearer", "tok")
        damaged = list(_damaged(source, rng))
        payload = rng.choice(damaged) if case % 3 else rng.randbytes(rng.randrange(256))
        code = _hostile_exchange(address, payload)
        outcomes[code] = outcomes.get(code, 0) + 1
        assert code in (ErrorCode.none, ErrorCode.sasl_authentication_failed), code
    assert bystander.api_versions() == 0
    bystander.close()
    return outcomes
