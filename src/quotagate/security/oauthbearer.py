"""Validating an OAUTHBEARER access token as Kafka's broker does (KIP-768).

Kafka's ``OAuthBearerValidatorCallbackHandler`` hands the token to a jose4j ``JwtConsumer``
(signature by a key of the JWKS, any algorithm but ``none``; ``exp`` and ``iat`` required;
``nbf`` honoured; ``aud`` and ``iss`` checked; ``clock.skew.seconds`` of leeway on the
times), then reads the claims as ``ValidatorAccessTokenValidator`` does: the subject from
``sasl.oauthbearer.sub.claim.name`` (trimmed, non-empty), scopes from
``sasl.oauthbearer.scope.claim.name`` (a string or a list, no duplicates). This module does the
same with PyJWT for the signature; the time is an argument, the keys are passed in.

Differences, both deliberate: only asymmetric algorithms are accepted (a JWKS endpoint
publishes public keys; an ``oct`` key there would let anyone who reads it mint tokens), and a
key is chosen by ``kid``, or, for a token without one, only when the key set has exactly one
key that fits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import jwt
from jwt import PyJWK, PyJWKError

DEFAULT_CLOCK_SKEW_SECONDS: Final = 30
DEFAULT_SUB_CLAIM_NAME: Final = "sub"
DEFAULT_SCOPE_CLAIM_NAME: Final = "scope"

ALGORITHMS: Final = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}
"""The algorithms a key of each type may verify."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One key of a JWKS with the members that say what it may verify."""

    key: PyJWK
    algorithm: str | None = None
    use: str | None = None


def parse_key_set(document: Any) -> dict[str, VerificationKey]:
    """A JWKS document (RFC 7517) as key id -> key; ``""`` for a key without ``kid``.

    Keys PyJWT cannot load (unknown types, symmetric keys a JWKS should not publish) are
    left out rather than failing the whole set, as jose4j skips them.
    """
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise ValueError('a JWKS is a JSON object with a "keys" array')
    keys: dict[str, VerificationKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, Mapping) or entry.get("kty") not in ALGORITHMS:
            continue
        try:
            key = PyJWK(dict(entry))
        except (PyJWKError, ValueError, TypeError):
            continue
        algorithm, use, key_id = entry.get("alg"), entry.get("use"), entry.get("kid", "")
        keys[str(key_id)] = VerificationKey(
            key,
            algorithm if isinstance(algorithm, str) else None,
            use if isinstance(use, str) else None,
        )
    return keys


class InvalidTokenError(Exception):
    """The token is refused. The message is for the log: it never contains the token."""


class MissingKeyError(InvalidTokenError):
    """No key of the set verifies this token's header; the set may need a refresh."""

    def __init__(self, message: str, key_id: str | None) -> None:
        super().__init__(message)
        self.key_id = key_id


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal: str
    scopes: frozenset[str]
    lifetime_ms: int
    """``exp``, in ms since the epoch."""
    start_ms: int | None
    """``iat``, in ms since the epoch."""


@dataclass(frozen=True, slots=True)
class TokenRules:
    """The listener's ``sasl.oauthbearer.*`` validation settings."""

    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    clock_skew_seconds: int = DEFAULT_CLOCK_SKEW_SECONDS
    sub_claim_name: str = DEFAULT_SUB_CLAIM_NAME
    scope_claim_name: str = DEFAULT_SCOPE_CLAIM_NAME


def validate(
    token: str, keys: Mapping[str, VerificationKey], rules: TokenRules, now_s: float
) -> ValidatedToken:
    """The token's principal and claims, or :class:`InvalidTokenError`.

    ``keys`` is :func:`parse_key_set` of the JWKS.
    """
    token = token.strip(_JAVA_TRIMMED)
    if not token:
        raise InvalidTokenError(
            "Empty JWT provided; expected three sections (header, payload, and signature)"
        )
    sections = token.split(".")
    while sections and not sections[-1]:  # Java's split drops trailing empty strings
        sections.pop()
    if len(sections) != 3:
        raise InvalidTokenError(
            "Malformed JWT provided; expected three sections (header, payload, and signature)"
        )
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise InvalidTokenError(f"Could not validate the access token: {exc}") from None
    algorithm = header.get("alg")
    key_id = header.get("kid")
    if not isinstance(algorithm, str) or algorithm == "none":
        raise InvalidTokenError(
            f"Could not validate the access token: algorithm {algorithm!r} is not allowed"
        )
    if key_id is not None and not isinstance(key_id, str):
        raise InvalidTokenError("Could not validate the access token: kid is not a string")
    key = _select(keys, key_id, algorithm)
    if key is None:
        raise MissingKeyError(
            "Unable to find a suitable verification key for JWS w/ header "
            f"{json.dumps(_shown(header), sort_keys=True)}",
            key_id,
        )
    try:
        claims = jwt.decode(
            token,
            key.key.key,
            algorithms=[algorithm],
            # Times, audience and issuer are checked below, as jose4j checks them, against
            # the time given rather than the clock.
            options={
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
            },
        )
    except jwt.PyJWTError as exc:
        raise InvalidTokenError(f"Could not validate the access token: {exc}") from None
    _check_registered_claims(claims, rules, int(now_s))
    return _token(claims, rules)


def claimed_principal(token: str, sub_claim_name: str = DEFAULT_SUB_CLAIM_NAME) -> str:
    """The principal ``token`` names, read as :func:`validate` reads it, but with nothing
    verified: for SASL passthrough, where the upstream validates the token and the gateway
    only learns whom it names. :class:`InvalidTokenError` when it names nobody."""
    try:
        claims = jwt.decode(token.strip(_JAVA_TRIMMED), options={"verify_signature": False})
    except (jwt.PyJWTError, RecursionError) as exc:
        raise InvalidTokenError(f"Could not read the access token: {exc}") from None
    return _claim_string(sub_claim_name, claims.get(sub_claim_name))


def _shown(header: Mapping[str, Any]) -> dict[str, Any]:
    """The header fields worth logging: small, no token material."""
    return {name: str(header[name])[:100] for name in ("alg", "kid", "typ") if name in header}


def _select(
    keys: Mapping[str, VerificationKey], key_id: str | None, algorithm: str
) -> VerificationKey | None:
    if key_id is not None:
        key = keys.get(key_id)
        return key if key is not None and _fits(key, algorithm) else None
    fitting = [key for key in keys.values() if _fits(key, algorithm)]
    return fitting[0] if len(fitting) == 1 else None


def _fits(key: VerificationKey, algorithm: str) -> bool:
    if key.use not in (None, "sig") or key.algorithm not in (None, algorithm):
        return False
    return algorithm in ALGORITHMS.get(str(key.key.key_type), ())


def _check_registered_claims(claims: Mapping[str, Any], rules: TokenRules, now: int) -> None:
    skew = rules.clock_skew_seconds
    problems: list[str] = []
    expiration = _numeric_date(claims, "exp", "Expiration Time")
    if expiration is None:
        problems.append("No Expiration Time (exp) claim present.")
    elif now >= expiration + skew:
        problems.append(
            f"The JWT is no longer valid - the evaluation time {now} is on or after the "
            f"Expiration Time (exp={expiration}) claim value (even when providing {skew} "
            "seconds of leeway to account for clock skew)."
        )
    if _numeric_date(claims, "iat", "Issued At") is None:
        problems.append("No Issued At (iat) claim present.")
    not_before = _numeric_date(claims, "nbf", "Not Before")
    if not_before is not None and now + skew < not_before:
        problems.append(
            f"The JWT is not yet valid as the evaluation time {now} is before the Not Before "
            f"(nbf={not_before}) claim time (even when providing {skew} seconds of leeway to "
            "account for clock skew)."
        )
    problem = _audience_problem(claims.get("aud"), rules.expected_audience)
    if problem:
        problems.append(problem)
    if rules.expected_issuer is not None:
        issuer = claims.get("iss")
        if issuer is None:
            problems.append(
                f"No Issuer (iss) claim present but was expecting {rules.expected_issuer}"
            )
        elif issuer != rules.expected_issuer:
            problems.append(
                f"Issuer (iss) claim value ({issuer}) doesn't match expected value of "
                f"{rules.expected_issuer}"
            )
    if problems:
        raise InvalidTokenError("Could not validate the access token: " + " ".join(problems))


def _numeric_date(claims: Mapping[str, Any], name: str, title: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTokenError(
            f"Could not validate the access token: the {title} ({name}) claim is not a number"
        )
    return int(value)


def _audience_problem(audience: Any, expected: tuple[str, ...]) -> str | None:
    # jose4j's default: a token naming an audience is refused unless one is expected.
    if audience is None:
        return "No Audience (aud) claim present." if expected else None
    values = [audience] if isinstance(audience, str) else audience
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return "The Audience (aud) claim is not a string or an array of strings."
    if any(value in expected for value in values):
        return None
    if not expected:
        return (
            f"Audience (aud) claim {values} present in the JWT but no expected audience "
            "value(s) were provided to the JWT Consumer. Expected one of [] as an aud value."
        )
    return (
        f"Audience (aud) claim {values} doesn't contain an acceptable identifier. "
        f"Expected one of {list(expected)} as an aud value."
    )


def _token(claims: Mapping[str, Any], rules: TokenRules) -> ValidatedToken:
    raw_scope = claims.get(rules.scope_claim_name)
    scope_values = (
        [raw_scope]
        if isinstance(raw_scope, str)
        else raw_scope
        if isinstance(raw_scope, list)
        else []
    )
    scopes: set[str] = set()
    for value in scope_values:
        scope = _claim_string(rules.scope_claim_name, value)
        if scope in scopes:
            raise InvalidTokenError(
                f"{rules.scope_claim_name} value must not contain duplicates - {scope} already "
                "present"
            )
        scopes.add(scope)
    subject = claims.get(rules.sub_claim_name)
    if subject is not None and not isinstance(subject, str):
        raise InvalidTokenError(
            f"Could not extract the '{rules.sub_claim_name}' claim from the access token"
        )
    principal = _claim_string(rules.sub_claim_name, subject)
    expiration = _numeric_date(claims, "exp", "Expiration Time")
    issued = _numeric_date(claims, "iat", "Issued At")
    assert expiration is not None  # required above
    if expiration < 0:
        raise InvalidTokenError(
            f'exp value must be non-negative; value given was "{expiration * 1000}"'
        )
    if issued is not None and issued < 0:
        raise InvalidTokenError(
            f'iat value must be null or non-negative; value given was "{issued * 1000}"'
        )
    return ValidatedToken(
        principal, frozenset(scopes), expiration * 1000, None if issued is None else issued * 1000
    )


def _claim_string(name: str, value: Any) -> str:
    """Kafka's ClaimValidationUtils.validateString."""
    if value is None:
        raise InvalidTokenError(f"{name} value must be non-null")
    if not isinstance(value, str):
        raise InvalidTokenError(f"Could not extract the '{name}' claim from the access token")
    if not value:
        raise InvalidTokenError(f"{name} value must be non-empty")
    trimmed: str = value.strip(_JAVA_TRIMMED)
    if not trimmed:
        raise InvalidTokenError(f"{name} value must not contain only whitespace")
    return trimmed


_JAVA_TRIMMED: Final = "".join(chr(code) for code in range(33))
"""What Java's ``String.trim()`` removes: every char up to U+0020."""
