"""SCRAM key derivation against RFC 7677's SCRAM-SHA-256 example (§3)."""

from __future__ import annotations

import base64

import pytest

from quotagate.security.scram import (
    ScramMechanism,
    client_proof,
    derive_keys,
    salted_password,
    server_signature,
    verify_client_proof,
    xor_bytes,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
AUTH_MESSAGE = (
    b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
)
PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_rfc7677_client_proof_and_server_signature() -> None:
    salted = salted_password(SHA256, "pencil", SALT, 4096)
    keys = derive_keys(SHA256, "pencil", SALT, 4096)
    assert client_proof(SHA256, salted, AUTH_MESSAGE) == PROOF
    assert server_signature(SHA256, keys.server_key, AUTH_MESSAGE) == SIGNATURE
    assert verify_client_proof(SHA256, keys.stored_key, AUTH_MESSAGE, PROOF)


def test_proof_from_another_password_or_message_is_rejected() -> None:
    keys = derive_keys(SHA256, "pencil", SALT, 4096)
    wrong = client_proof(SHA256, salted_password(SHA256, "pencil!", SALT, 4096), AUTH_MESSAGE)
    assert not verify_client_proof(SHA256, keys.stored_key, AUTH_MESSAGE, wrong)
    assert not verify_client_proof(SHA256, keys.stored_key, AUTH_MESSAGE + b"x", PROOF)
    assert not verify_client_proof(SHA256, keys.stored_key, AUTH_MESSAGE, PROOF[:-1])


def test_mechanisms_use_their_own_hash() -> None:
    k256 = derive_keys(ScramMechanism.SCRAM_SHA_256, "pw", b"salt", 4096)
    k512 = derive_keys(ScramMechanism.SCRAM_SHA_512, "pw", b"salt", 4096)
    assert (len(k256.stored_key), len(k256.server_key)) == (32, 32)
    assert (len(k512.stored_key), len(k512.server_key)) == (64, 64)
    assert ScramMechanism.from_name("SCRAM-SHA-512") is ScramMechanism.SCRAM_SHA_512
    with pytest.raises(ValueError):
        ScramMechanism.from_name("SCRAM-SHA-1")


def test_xor_refuses_unequal_lengths() -> None:
    assert xor_bytes(b"\x0f\xf0", b"\xff\xff") == b"\xf0\x0f"
    with pytest.raises(ValueError):
        xor_bytes(b"ab", b"a")
