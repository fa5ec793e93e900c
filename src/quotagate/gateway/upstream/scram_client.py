"""SCRAM-SHA-256 / SCRAM-SHA-512 on the client side (RFC 5802), as Kafka's ScramSaslClient.

Written here rather than taken from a library: the maths is the store's (security/scram.py, the
same formulas the server side checks proofs with), and Kafka encodes passwords as UTF-8 without
SASLprep, which the SCRAM libraries for Python apply; a shared formula keeps both sides equal.
Pure: tokens in, tokens out.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable
from enum import Enum, auto

from quotagate.security.sasl import SaslError
from quotagate.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SERVER_FINAL,
    SERVER_FIRST,
    ScramMechanism,
    client_proof,
    default_nonce,
    encode_saslname,
    salted_password,
    server_key,
    server_signature,
)

_GS2_HEADER = "n,,"
SaltedCache = Callable[[ScramMechanism, str, bytes, int], bytes]


class _State(Enum):
    FIRST = auto()
    FINAL = auto()
    VERIFY = auto()
    COMPLETE = auto()
    FAILED = auto()


class ScramClient:
    """One exchange: first(), final(server-first), verify(server-final)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        nonce: str | None = None,
        salted: SaltedCache = salted_password,
    ) -> None:
        self._mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = nonce or default_nonce()
        self._salted = salted
        self._state = _State.FIRST
        self._first_bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def first(self) -> bytes:
        self._expect(_State.FIRST, _State.FINAL)
        return (_GS2_HEADER + self._first_bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        self._expect(_State.FINAL, _State.VERIFY)
        text = _text(server_first, "server first")
        match = SERVER_FIRST.fullmatch(text)
        if match is None:
            raise self._failed("Invalid SCRAM server first message format")
        nonce = match["nonce"]
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._failed("Invalid server nonce: does not start with the client nonce")
        iterations = int(match["iterations"])
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            # Kafka's client refuses these too: a server could otherwise make it spin.
            raise self._failed(f"Requested iterations {iterations} outside the allowed range")
        try:
            salt = base64.b64decode(match["salt"], validate=True)
        except (binascii.Error, ValueError):
            raise self._failed("Invalid base64 salt in the SCRAM server first message") from None
        salted = self._salted(self._mechanism, self._password, salt, iterations)
        channel = base64.b64encode(_GS2_HEADER.encode("ascii")).decode("ascii")
        without_proof = f"c={channel},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        proof = client_proof(self._mechanism, salted, auth_message)
        self._server_signature = server_signature(
            self._mechanism, server_key(self._mechanism, salted), auth_message
        )
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        """Raises :class:`SaslError` unless the server proved it knows the password too."""
        self._expect(_State.VERIFY, _State.COMPLETE)
        match = SERVER_FINAL.fullmatch(_text(server_final, "server final"))
        if match is None:
            raise self._failed("Invalid SCRAM server final message format")
        if match["error"] is not None:
            raise self._failed(f"SCRAM server refused: {match['error']}")
        try:
            signature = base64.b64decode(match["verifier"], validate=True)
        except (binascii.Error, ValueError):
            raise self._failed("Invalid base64 in the SCRAM server final message") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._failed("Invalid server signature in the SCRAM server final message")

    def _expect(self, state: _State, then: _State) -> None:
        if self._state is not state:
            raise self._failed(f"SCRAM client used out of order (in state {self._state.name})")
        self._state = then

    def _failed(self, message: str) -> SaslError:
        self._state = _State.FAILED
        return SaslError(message)


def _text(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"Invalid SCRAM {what} message: not UTF-8") from None
