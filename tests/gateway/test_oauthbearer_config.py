"""OAUTHBEARER listener keys, with Kafka's names and defaults; mistakes refused at start."""

from __future__ import annotations

from typing import Any

import pytest

from quotagate.gateway.config import ConfigError, parse_config

JWKS = "https://idp.example.com/jwks.json"


def _listener(**keys: Any) -> dict[str, Any]:
    return {"listen": "127.0.0.1:19094", "security.protocol": "SASL_PLAINTEXT", **keys}


def test_keys_and_defaults() -> None:
    listener = parse_config(
        {
            "listeners": [
                _listener(
                    **{
                        "sasl.enabled.mechanisms": ["OAUTHBEARER", "SCRAM-SHA-512"],
                        "sasl.oauthbearer.jwks.endpoint.url": JWKS,
                        "sasl.oauthbearer.expected.audience": "kafka, quotas",
                        "sasl.oauthbearer.expected.issuer": "https://idp.example.com",
                    }
                )
            ]
        }
    ).listeners[0]
    assert listener.oauthbearer_jwks_endpoint_url == JWKS
    assert listener.oauthbearer_expected_audience == ("kafka", "quotas")
    assert listener.oauthbearer_expected_issuer == "https://idp.example.com"
    assert listener.oauthbearer_jwks_endpoint_refresh_ms == 3_600_000
    assert (
        listener.oauthbearer_jwks_endpoint_retry_backoff_ms,
        listener.oauthbearer_jwks_endpoint_retry_backoff_max_ms,
    ) == (100, 10_000)
    assert listener.oauthbearer_clock_skew_seconds == 30
    assert (listener.oauthbearer_sub_claim_name, listener.oauthbearer_scope_claim_name) == (
        "sub",
        "scope",
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"sasl.enabled.mechanisms": ["OAUTHBEARER"]}, "set sasl.oauthbearer.jwks.endpoint.url"),
        ({"sasl.oauthbearer.jwks.endpoint.url": JWKS}, "but no OAUTHBEARER"),
        (
            {"sasl.enabled.mechanisms": ["OAUTHBEARER"],
             "sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"},
            "must be an https://",
        ),
        (
            {"sasl.enabled.mechanisms": ["OAUTHBEARER"], "sasl.oauthbearer.jwks.endpoint.url": JWKS,
             "sasl.oauthbearer.clock.skew.seconds": -1},
            "out of range",
        ),
        ({"sasl.enabled.mechanisms": ["GSSAPI"]}, "is not supported"),
    ],
)  # fmt: skip
def test_mistakes_are_refused(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"listeners": [_listener(**keys)]})


def test_sub_claim_name_is_one_key_in_both_modes() -> None:
    """The claim that names the principal: of the validated token (terminate), of the token
    the upstream validates (passthrough); one key, one field."""
    terminate, passthrough = parse_config(
        {
            "listeners": [
                _listener(
                    **{
                        "sasl.enabled.mechanisms": ["OAUTHBEARER"],
                        "sasl.oauthbearer.jwks.endpoint.url": JWKS,
                        "sasl.oauthbearer.sub.claim.name": "client_id",
                    }
                ),
                {
                    **_listener(**{"sasl.oauthbearer.sub.claim.name": "azp"}),
                    "name": "PASSTHROUGH",
                    "listen": "127.0.0.1:19096",
                    "sasl.mode": "passthrough",
                },
            ]
        }
    ).listeners
    assert (terminate.sasl_mode, terminate.oauthbearer_sub_claim_name) == ("terminate", "client_id")
    assert (passthrough.sasl_mode, passthrough.oauthbearer_sub_claim_name) == ("passthrough", "azp")


@pytest.mark.parametrize(
    "keys",
    [
        {"sasl.oauthbearer.jwks.endpoint.url": JWKS},
        {"sasl.oauthbearer.expected.audience": "kafka"},
        {"sasl.oauthbearer.scope.claim.name": "scp"},
        {"sasl.enabled.mechanisms": ["OAUTHBEARER"]},
        {"connections.max.reauth.ms": 60_000},
    ],
    ids=lambda keys: next(iter(keys)),
)
def test_terminate_keys_on_a_passthrough_listener_are_refused(keys: dict[str, Any]) -> None:
    """In passthrough the upstream validates tokens and picks mechanisms: keys that would do
    it on the gateway are named, not silently ignored."""
    with pytest.raises(ConfigError, match=f'{next(iter(keys))} apply only with sasl.mode = "t'):
        parse_config({"listeners": [_listener(**{"sasl.mode": "passthrough", **keys})]})


def test_connections_max_reauth_ms_is_read_and_off_by_default() -> None:
    reauth = {"name": "REAUTH", "listen": "127.0.0.1:19098", "connections.max.reauth.ms": 3_600_000}
    default, set_ = parse_config({"listeners": [_listener(), _listener(**reauth)]}).listeners
    assert (default.connections_max_reauth_ms, set_.connections_max_reauth_ms) == (0, 3_600_000)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_connections_max_reauth_ms_needs_a_sasl_listener(protocol: str) -> None:
    listener: dict[str, Any] = {
        "listen": "127.0.0.1:19094",
        "security.protocol": protocol,
        "connections.max.reauth.ms": 60_000,
    }
    if protocol == "SSL":
        listener |= {"ssl.certificate.location": "x.crt", "ssl.key.location": "x.key"}
    with pytest.raises(ConfigError, match=r"connections\.max\.reauth\.ms asks SASL clients"):
        parse_config({"listeners": [listener]})


def test_connections_max_reauth_ms_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match=r"connections\.max\.reauth\.ms"):
        parse_config({"listeners": [_listener(**{"connections.max.reauth.ms": -1})]})
