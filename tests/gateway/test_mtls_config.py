"""Listener keys for client certificates: read as Kafka names them, mistakes refused at start."""

from __future__ import annotations

from typing import Any

import pytest

from quotagate.gateway.config import ConfigError, parse_config


def _listener(**keys: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "listen": "127.0.0.1:19093",
        "security.protocol": "SSL",
        "ssl.certificate.location": "gateway.crt",
        "ssl.key.location": "gateway.key",
    }
    return {**base, **keys}


def test_ssl_listener_with_required_client_certificates() -> None:
    config = parse_config(
        {
            "listeners": [
                _listener(
                    **{
                        "ssl.client.auth": "required",
                        "ssl.ca.location": "ca.pem",
                        "ssl.principal.mapping.rules": "RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT",
                    }
                )
            ]
        }
    )
    listener = config.listeners[0]
    assert listener.ssl_client_auth == "required"
    assert listener.ssl_ca_location == "ca.pem"
    assert listener.ssl_principal_mapping_rules == "RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT"


def test_defaults_ask_for_no_certificate() -> None:
    listener = parse_config({"listeners": [_listener()]}).listeners[0]
    assert (listener.ssl_client_auth, listener.ssl_ca_location) == ("none", None)
    assert listener.ssl_principal_mapping_rules == "DEFAULT"


def test_invalid_rules_are_refused_with_kafkas_message() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(
            {
                "listeners": [
                    _listener(
                        **{
                            "ssl.client.auth": "required",
                            "ssl.ca.location": "ca.pem",
                            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=x.*$/$1/L/U",
                        }
                    )
                ]
            }
        )
    assert str(refused.value) == (
        "ssl.principal.mapping.rules: Invalid rule: `RULE:^CN=(.*?),OU=x.*$/$1/L/U`, "
        "unmatched substring: `/U`"
    )


@pytest.mark.parametrize(
    ("rules", "why"),
    [
        ("RULE:^CN=(.*)$/$x/", "Illegal group reference"),
        ("RULE:^CN=(.*$/$1/", "invalid regular expression"),
        ("RULE:^CN=(\\p{L}+)$/$1/", "Unicode classes"),
        ("RULE:^CN=([a-z&&[^e]]+)$/$1/", "class intersection"),
        ("RULE:^CN=([a-z[0-9]]+)$/$1/", "nests a character class"),
    ],
)
def test_rules_java_would_throw_on_or_read_differently_are_refused(rules: str, why: str) -> None:
    listener = _listener(
        **{"ssl.client.auth": "required", "ssl.ca.location": "ca.pem"},
        **{"ssl.principal.mapping.rules": rules},
    )
    with pytest.raises(ConfigError, match=why):
        parse_config({"listeners": [listener]})


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"ssl.client.auth": "always"}, "is not one of none, requested, required"),
        ({"ssl.client.auth": "required"}, "needs ssl.ca.location"),
        (
            {"security.protocol": "PLAINTEXT", "ssl.client.auth": "required",
             "ssl.ca.location": "ca.pem"},
            "need security.protocol",
        ),
        ({"ssl.principal.mapping.rules": "DEFAULT,DEFAULT"}, "apply to client certificates"),
        (
            {"security.protocol": "SASL_SSL", "ssl.client.auth": "required",
             "ssl.ca.location": "ca.pem", "ssl.principal.mapping.rules": "RULE:(.*)/$1/"},
            "SASL principal",
        ),
    ],
)  # fmt: skip
def test_keys_where_they_cannot_act_are_refused(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"listeners": [_listener(**keys)]})
