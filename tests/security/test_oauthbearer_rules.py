"""The registered claims as Kafka's jose4j consumer checks them: exp and nbf with clock skew,
aud against ``expected.audience``, iss against ``expected.issuer``; the time is an argument."""

from __future__ import annotations

import json
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from quotagate.security.oauthbearer import (
    InvalidTokenError,
    MissingKeyError,
    TokenRules,
    parse_key_set,
    validate,
)

NOW = 1_764_000_000
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KEYS = parse_key_set(
    {"keys": [{**json.loads(RSAAlgorithm.to_jwk(KEY.public_key())), "kid": "k1", "use": "sig"}]}
)


def token(key: Any = KEY, kid: str | None = "k1", **claims: Any) -> str:
    payload = {"sub": "alice", "iat": NOW, "exp": NOW + 600, **claims}
    headers = {} if kid is None else {"kid": kid}
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, key, "RS256", headers)


def test_expiry_with_clock_skew() -> None:
    rules = TokenRules(clock_skew_seconds=30)
    assert validate(token(exp=NOW - 29), KEYS, rules, NOW).principal == "alice"
    with pytest.raises(InvalidTokenError, match="no longer valid"):
        validate(token(exp=NOW - 30), KEYS, rules, NOW)
    with pytest.raises(InvalidTokenError, match="no longer valid"):
        validate(token(exp=NOW), KEYS, TokenRules(clock_skew_seconds=0), NOW)


def test_not_before_with_clock_skew() -> None:
    rules = TokenRules(clock_skew_seconds=30)
    assert validate(token(nbf=NOW + 30), KEYS, rules, NOW).principal == "alice"
    with pytest.raises(InvalidTokenError, match="not yet valid"):
        validate(token(nbf=NOW + 31), KEYS, rules, NOW)


def test_an_iat_in_the_future_is_not_checked_as_jose4j_does_not() -> None:
    assert validate(token(iat=NOW + 3600), KEYS, TokenRules(), NOW).principal == "alice"


def test_expiry_is_required() -> None:
    with pytest.raises(InvalidTokenError, match=r"No Expiration Time \(exp\)"):
        validate(token(exp=None), KEYS, TokenRules(), NOW)


def test_audience() -> None:
    rules = TokenRules(expected_audience=("kafka", "other"))
    assert validate(token(aud="kafka"), KEYS, rules, NOW).principal == "alice"
    assert validate(token(aud=["x", "other"]), KEYS, rules, NOW).principal == "alice"
    with pytest.raises(InvalidTokenError, match="doesn't contain an acceptable identifier"):
        validate(token(aud="web"), KEYS, rules, NOW)
    with pytest.raises(InvalidTokenError, match=r"No Audience \(aud\) claim present"):
        validate(token(), KEYS, rules, NOW)
    # jose4j's default when no audience is expected: a token naming one is refused.
    with pytest.raises(InvalidTokenError, match="no expected audience"):
        validate(token(aud="kafka"), KEYS, TokenRules(), NOW)


def test_issuer() -> None:
    rules = TokenRules(expected_issuer="https://idp")
    assert validate(token(iss="https://idp"), KEYS, rules, NOW).principal == "alice"
    with pytest.raises(InvalidTokenError, match="doesn't match expected value"):
        validate(token(iss="https://evil"), KEYS, rules, NOW)
    with pytest.raises(InvalidTokenError, match=r"No Issuer \(iss\) claim present"):
        validate(token(), KEYS, rules, NOW)
    assert validate(token(iss="anyone"), KEYS, TokenRules(), NOW).principal == "alice"


def test_bad_signature() -> None:
    with pytest.raises(InvalidTokenError, match="Signature verification failed"):
        validate(token(key=OTHER), KEYS, TokenRules(), NOW)
    # A valid token whose payload was swapped keeps a signature that no longer fits.
    header, _, signature = token().split(".")
    _, payload, _ = token(sub="mallory").split(".")
    with pytest.raises(InvalidTokenError, match="Signature verification failed"):
        validate(f"{header}.{payload}.{signature}", KEYS, TokenRules(), NOW)


def test_unknown_key_id_asks_for_a_refresh() -> None:
    with pytest.raises(MissingKeyError) as missing:
        validate(token(kid="k2"), KEYS, TokenRules(), NOW)
    assert missing.value.key_id == "k2"
    assert "k2" in str(missing.value)


def test_a_token_without_kid_uses_the_only_key() -> None:
    assert validate(token(kid=None), KEYS, TokenRules(), NOW).principal == "alice"


def test_sub_and_scope_claim_names() -> None:
    rules = TokenRules(sub_claim_name="client_id", scope_claim_name="scp")
    validated = validate(token(client_id="svc", scp="write read"), KEYS, rules, NOW)
    assert (validated.principal, validated.scopes) == ("svc", {"write read"})


def test_a_claim_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(InvalidTokenError, match=r"[Ss]ub"):
        validate(token(sub=42), KEYS, TokenRules(), NOW)
    with pytest.raises(InvalidTokenError, match="not a number"):
        validate(token(exp="soon"), KEYS, TokenRules(), NOW)


def test_no_message_carries_the_token() -> None:
    for bad in (token(key=OTHER), token(exp=NOW - 100), token(aud="x"), token(kid="nope")):
        with pytest.raises(InvalidTokenError) as refused:
            validate(bad, KEYS, TokenRules(), NOW)
        for part in bad.split("."):
            assert part not in str(refused.value)
