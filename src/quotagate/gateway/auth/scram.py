"""SCRAM-SHA-256 / SCRAM-SHA-512 on the server side (RFC 5802, RFC 7677), no channel binding.

Two client tokens: client-first (``n,[a=authzid],n=user,r=cnonce[,ext]``) and client-final
(``c=gs2-header-b64,r=nonce[,ext],p=proof``). The AuthMessage is built from the exact bytes the
client sent, as RFC 5802 requires.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto

from quotagate.security.sasl import SaslError
from quotagate.security.scram import (
    CLIENT_FINAL,
    CLIENT_FIRST,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramKeys,
    ScramMechanism,
    decode_saslname,
    default_nonce,
    server_signature,
    verify_client_proof,
)

CredentialLookup = Callable[[str, ScramMechanism], ScramKeys | None]
NonceFactory = Callable[[], str]

# Iterations announced for users that do not exist; the store's default, so nothing stands out.
DECOY_ITERATIONS = 8192


class _State(Enum):
    CLIENT_FIRST = auto()
    CLIENT_FINAL = auto()
    COMPLETE = auto()
    FAILED = auto()


@dataclass(frozen=True, slots=True)
class _FirstExchange:
    username: str
    gs2_header: bytes
    client_first_bare: bytes
    server_first: bytes
    nonce: str
    keys: ScramKeys
    known_user: bool


class ScramServer:
    """One SCRAM exchange for one mechanism against credentials found by ``lookup``."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: CredentialLookup,
        decoy_secret: bytes,
        nonce_factory: NonceFactory = default_nonce,
    ) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._decoy_secret = decoy_secret
        self._nonce_factory = nonce_factory
        self._state = _State.CLIENT_FIRST
        self._first: _FirstExchange | None = None

    @property
    def mechanism(self) -> str:
        return self._mechanism.value

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def credential_expires_ms(self) -> int | None:
        return None  # SCRAM credentials (no delegation tokens here) do not expire

    @property
    def username(self) -> str:
        if self._state is not _State.COMPLETE or self._first is None:
            raise RuntimeError("SCRAM exchange has not completed")
        return self._first.username

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state is _State.CLIENT_FIRST:
                reply = self._client_first(token)
                self._state = _State.CLIENT_FINAL
                return reply
            if self._state is _State.CLIENT_FINAL:
                reply = self._client_final(token)
                self._state = _State.COMPLETE
                return reply
        except SaslError:
            self._state = _State.FAILED
            raise
        state, self._state = self._state, _State.FAILED
        raise SaslError(f"Unexpected SCRAM token in state {state.name}")

    def _client_first(self, token: bytes) -> bytes:
        text = _decode(token, "client first")
        match = CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslError("Invalid SCRAM client first message format")
        if match["cbind"].startswith("p="):
            raise SaslError("SCRAM channel binding is not supported")
        if match["reserved"] is not None:
            # RFC 5802 §5.1: an unknown mandatory extension must fail the exchange.
            raise SaslError("Unsupported mandatory SCRAM extension")
        if _extension(match["ext"], "tokenauth") == "true":
            raise SaslError("Delegation-token authentication is not supported")
        username = decode_saslname(match["saslname"])
        authzid = match["authzid"]
        if authzid is not None and decode_saslname(authzid) != username:
            raise SaslError(
                "Authentication failed: Client requested an authorization id that is different"
                " from username",
                public=True,
            )
        keys = self._lookup(username, self._mechanism)
        known = keys is not None
        if keys is None:
            keys = self._decoy_keys(username)
        if not MIN_ITERATIONS <= keys.iterations <= MAX_ITERATIONS:
            raise SaslError(
                f"Iterations {keys.iterations} outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
                f" for {self._mechanism.value}"
            )
        nonce = match["nonce"] + self._nonce_factory()
        salt = base64.b64encode(keys.salt).decode("ascii")
        server_first = f"r={nonce},s={salt},i={keys.iterations}".encode("ascii")
        self._first = _FirstExchange(
            username=username,
            gs2_header=match["gs2"].encode("utf-8"),
            client_first_bare=match["bare"].encode("utf-8"),
            server_first=server_first,
            nonce=nonce,
            keys=keys,
            known_user=known,
        )
        return server_first

    def _client_final(self, token: bytes) -> bytes:
        first = self._first
        assert first is not None  # set by the CLIENT_FIRST step
        text = _decode(token, "client final")
        match = CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslError("Invalid SCRAM client final message format")
        if _b64decode(match["cbind"]) != first.gs2_header:
            raise SaslError("SCRAM channel-binding data does not match the client first message")
        if not hmac.compare_digest(match["nonce"].encode("ascii"), first.nonce.encode("ascii")):
            raise SaslError("Invalid client nonce in the final client message.")
        auth_message = b",".join(
            (first.client_first_bare, first.server_first, match["without_proof"].encode("ascii"))
        )
        proof = _b64decode(match["proof"])
        valid = verify_client_proof(self._mechanism, first.keys.stored_key, auth_message, proof)
        if not (valid and first.known_user):
            raise SaslError("Invalid client credentials")
        signature = server_signature(self._mechanism, first.keys.server_key, auth_message)
        return b"v=" + base64.b64encode(signature)

    def _decoy_keys(self, username: str) -> ScramKeys:
        # A stable salt per (mechanism, user) so that probing twice cannot tell a decoy apart;
        # the keys are random, so no proof can ever match.
        material = f"{self._mechanism.value}\x00{username}".encode()
        salt = hmac.new(self._decoy_secret, material, "sha256").digest()
        size = self._mechanism.digest_size
        return ScramKeys(
            salt=salt,
            iterations=DECOY_ITERATIONS,
            stored_key=secrets.token_bytes(size),
            server_key=secrets.token_bytes(size),
        )


def _decode(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SaslError(f"Invalid SCRAM {what} message: not UTF-8") from exc


def _b64decode(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SaslError("Invalid base64 in SCRAM message") from exc


def _extension(extensions: str, name: str) -> str | None:
    for item in extensions.split(","):
        key, _, value = item.partition("=")
        if key == name:
            return value
    return None
