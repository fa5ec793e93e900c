"""SCRAM (RFC 5802, RFC 7677) written once: the key derivation the store, the server and the
client share, and the message grammar the server, the client and SASL passthrough read.

Pure functions of bytes and text. Passwords are encoded as UTF-8 without SASLprep, as Kafka's
ScramFormatter does, so credentials created here and by Kafka's tooling agree.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import Enum
from typing import Final

from quotagate.security.protocol import SCRAM_SHA_256, SCRAM_SHA_512

# Kafka refuses SCRAM credentials outside this range (ScramMechanism.min/maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramMechanism(Enum):
    """The two SCRAM mechanisms Kafka supports, with the hash each one is built on."""

    SCRAM_SHA_256 = SCRAM_SHA_256
    SCRAM_SHA_512 = SCRAM_SHA_512

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """The mechanism for a SASL mechanism name; ValueError if it is not a SCRAM one."""
        return cls(name)


@dataclass(frozen=True, slots=True)
class ScramKeys:
    """What a server keeps for one user and mechanism: enough to verify, never the password."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def hmac_digest(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def hash_digest(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Client Key")


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Server Key")


def derive_keys(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramKeys:
    """The stored form of a password (salt, i, StoredKey, ServerKey)."""
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramKeys(
        salt=salt,
        iterations=iterations,
        stored_key=hash_digest(mechanism, client_key(mechanism, salted)),
        server_key=server_key(mechanism, salted),
    )


def xor_bytes(left: bytes, right: bytes) -> bytes:
    if len(left) != len(right):
        raise ValueError("xor of byte strings of different lengths")
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def verify_client_proof(
    mechanism: ScramMechanism, stored_key: bytes, auth_message: bytes, proof: bytes
) -> bool:
    """Recover ClientKey from the proof and check that it hashes to StoredKey, in constant time."""
    if len(proof) != mechanism.digest_size:
        return False
    client_signature = hmac_digest(mechanism, stored_key, auth_message)
    recovered_client_key = xor_bytes(proof, client_signature)
    return hmac.compare_digest(hash_digest(mechanism, recovered_client_key), stored_key)


def server_signature(mechanism: ScramMechanism, server_key_: bytes, auth_message: bytes) -> bytes:
    return hmac_digest(mechanism, server_key_, auth_message)


def client_proof(mechanism: ScramMechanism, salted: bytes, auth_message: bytes) -> bytes:
    """ClientProof for a given SaltedPassword; the client side, used by tests and tooling."""
    key = client_key(mechanism, salted)
    signature = hmac_digest(mechanism, hash_digest(mechanism, key), auth_message)
    return xor_bytes(key, signature)


# The message grammar (RFC 5802 §7).
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII except ','
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_SASLNAME = r"(?:[^,=]|=2C|=3D)+"
_EXT = r"[A-Za-z]+=[^,]*"  # Kafka sends multi-letter extensions (tokenauth)
CLIENT_FIRST: Final = re.compile(
    rf"(?P<gs2>(?P<cbind>n|y|p=[A-Za-z0-9.-]+),(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>(?P<reserved>m=[^,]*,)?n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<ext>(?:,{_EXT})*))",
    re.DOTALL,
)
CLIENT_FINAL: Final = re.compile(
    rf"(?P<without_proof>c=(?P<cbind>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?:,{_EXT})*)"
    rf",p=(?P<proof>{_BASE64})",
    re.DOTALL,
)
SERVER_FIRST: Final = re.compile(
    rf"(?:m=[^,]*,)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,9}})"
    r"(?:,.*)?",
    re.DOTALL,
)
SERVER_FINAL: Final = re.compile(
    rf"(?:e=(?P<error>[^,]*)|v=(?P<verifier>{_BASE64}))(?:,.*)?", re.DOTALL
)


def encode_saslname(name: str) -> str:
    """RFC 5802 §5.1: ``=`` and ``,`` travel as ``=3D`` and ``=2C`` (``=`` first)."""
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(saslname: str) -> str:
    """RFC 5802 §5.1: ',' and '=' travel as '=2C' and '=3D'; the grammar already rejected others."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def client_first_username(text: str) -> str | None:
    """The user a client-first message names (``=2C``/``=3D`` decoded), None if it is not one;
    for SASL passthrough, which reads the name but lets the upstream judge the rest."""
    match = CLIENT_FIRST.fullmatch(text)
    return None if match is None else decode_saslname(match["saslname"])


def default_nonce() -> str:
    # token_urlsafe yields [A-Za-z0-9_-]: printable, never ','.
    return secrets.token_urlsafe(24)
