"""Kafka's ``ValidatorAccessTokenValidatorTest``, ``AccessTokenValidatorTest`` and the claim
rules of ``ClaimValidationUtilsTest`` as vectors, on tokens signed here with keys made here.

Kafka's ``AccessTokenBuilder`` defaults are kept: subject ``jdoe``, scope ``engineering``,
issued now, expiring in 60 s. The evaluation time is an argument, so nothing here reads a
clock against a token.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from quotagate.security.oauthbearer import (
    InvalidTokenError,
    TokenRules,
    VerificationKey,
    parse_key_set,
    validate,
)

NOW = 1_764_000_000  # seconds: the builder's issuedAtSeconds
RULES = TokenRules()  # Kafka's test: clock skew 30, no audience, no issuer


def _jwks(public_jwk: str, key_id: str) -> dict[str, VerificationKey]:
    return parse_key_set({"keys": [{**json.loads(public_jwk), "kid": key_id}]})


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
KEYS = {
    **_jwks(RSAAlgorithm.to_jwk(RSA_KEY.public_key()), "rsa"),
    **_jwks(ECAlgorithm.to_jwk(EC_KEY.public_key()), "ec"),
}


def build(
    *,
    alg: str = "RS256",
    subject: str | None = "jdoe",
    scope: Any = "engineering",
    sub_claim_name: str = "sub",
    **custom: Any,
) -> str:
    claims: dict[str, Any] = {"iat": NOW, "exp": NOW + 60, **custom}
    if subject is not None:
        claims[sub_claim_name] = subject
    if scope is not None:
        claims["scope"] = scope
    key, kid = (EC_KEY, "ec") if alg.startswith("ES") else (RSA_KEY, "rsa")
    return jwt.encode(claims, key, alg, headers={"kid": kid})


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_encryption_algorithm(alg: str) -> None:
    token = validate(build(alg=alg), KEYS, RULES, NOW)
    assert token.principal == "jdoe"
    assert token.start_ms == NOW * 1000
    assert token.lifetime_ms == (NOW + 60) * 1000
    assert token.scopes == {"engineering"}


def _section(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def test_invalid_encryption_algorithm() -> None:
    header = _section({"alg": "fake", "kid": "rsa"})
    token = f"{header}.{_section({'sub': 'jdoe'})}.c2ln"
    with pytest.raises(InvalidTokenError):
        validate(token, KEYS, RULES, NOW)


def test_missing_sub_should_be_valid() -> None:
    rules = TokenRules(sub_claim_name="client_id")
    token = build(subject=None, client_id="otherSub")
    assert validate(token, KEYS, rules, NOW).principal == "otherSub"


@pytest.mark.parametrize("value", ["", "    "])
def test_empty_and_whitespace(value: str) -> None:
    with pytest.raises(InvalidTokenError, match="Empty JWT provided"):
        validate(value, KEYS, RULES, NOW)


def test_empty_sections() -> None:
    with pytest.raises(InvalidTokenError, match="Malformed JWT provided"):
        validate("..", KEYS, RULES, NOW)


def test_missing_header_payload_signature() -> None:
    none_header = _section({"alg": "none"})
    for token in (
        f".{_section({})}.",
        f"{none_header}..",
        f"{none_header}.{_section({})}.",
    ):
        with pytest.raises(InvalidTokenError):
            validate(token, KEYS, RULES, NOW)


def test_the_none_algorithm_is_refused_even_signed_nowhere() -> None:
    token = f"{_section({'alg': 'none'})}.{_section({'sub': 'a', 'iat': NOW, 'exp': NOW + 9})}.c2ln"
    with pytest.raises(InvalidTokenError, match="not allowed"):
        validate(token, KEYS, RULES, NOW)


# ClaimValidationUtilsTest, through a token's claims.


def test_scopes_list() -> None:
    assert validate(build(scope=["a", "b"]), KEYS, RULES, NOW).scopes == {"a", "b"}


@pytest.mark.parametrize(
    ("scope", "why"),
    [
        (["a", "b", "a"], "must not contain duplicates"),
        (["a", "b", "  a  "], "must not contain duplicates"),
        (["a", ""], "must be non-empty"),
        (["a", None], "must be non-null"),
        (["a", "  "], "must not contain only whitespace"),
    ],
)
def test_scopes_refused(scope: list[Any], why: str) -> None:
    with pytest.raises(InvalidTokenError, match=why):
        validate(build(scope=scope), KEYS, RULES, NOW)


@pytest.mark.parametrize(
    ("subject", "why"),
    [("", "must be non-empty"), (None, "must be non-null"), ("  ", "only whitespace")],
)
def test_subject_refused(subject: str | None, why: str) -> None:
    with pytest.raises(InvalidTokenError, match=why):
        validate(build(subject=subject), KEYS, RULES, NOW)


def test_subject_is_trimmed() -> None:
    assert validate(build(subject="  jdoe "), KEYS, RULES, NOW).principal == "jdoe"


def test_expiration_zero_is_allowed_and_negative_refused() -> None:
    # exp = 0 is a valid value for ClaimValidationUtils, but long expired for jose4j.
    with pytest.raises(InvalidTokenError, match="no longer valid"):
        validate(build(exp=0), KEYS, RULES, NOW)
    with pytest.raises(InvalidTokenError, match="exp value must be non-negative"):
        validate(build(exp=-1), KEYS, RULES, -100)


def test_issued_at_negative_refused_and_required() -> None:
    with pytest.raises(InvalidTokenError, match="iat value must be null or non-negative"):
        validate(build(iat=-1), KEYS, RULES, NOW)
    token = jwt.encode({"sub": "jdoe", "exp": NOW + 60}, RSA_KEY, "RS256", headers={"kid": "rsa"})
    with pytest.raises(InvalidTokenError, match=r"No Issued At \(iat\) claim present"):
        validate(token, KEYS, RULES, NOW)
