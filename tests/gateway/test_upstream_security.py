"""``[upstream]`` security keys: what the config accepts, refuses (and how it says so), the
secret type's masking, and the librdkafka translation used by the fleet's topics."""

from __future__ import annotations

import logging
import pickle
import ssl
from pathlib import Path
from typing import Any

import pytest

from quotagate.gateway.config import ConfigError, parse_config, store_settings
from quotagate.gateway.settings.secret import Secret, SecretError, resolve_secret
from quotagate.gateway.upstream.security import client_ssl_context
from support.certificates import CertificateAuthority


def config(upstream: dict[str, Any], listeners: list[dict[str, Any]] | None = None) -> Any:
    return parse_config(
        {
            "upstream": {"bootstrap.servers": "127.0.0.1:9092", **upstream},
            "listeners": listeners or [{"listen": "127.0.0.1:9192"}],
        }
    )


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


def test_plaintext_by_default() -> None:
    spec = config({}).upstream_security
    assert spec.security_protocol == "PLAINTEXT"
    assert spec.librdkafka_config() == {"security.protocol": "PLAINTEXT"}


def test_the_final_checks_config_is_accepted(
    ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_PASSWORD", "p@ss")
    parsed = config(
        {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.certificate),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "gateway",
            "sasl.password": "${env:UPSTREAM_PASSWORD}",
        },
        [
            {
                "listen": "127.0.0.1:9192",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mode": "passthrough",
            }
        ],
    )
    spec = parsed.upstream_security
    assert spec.sasl_password == Secret("p@ss")
    assert spec.verifies_host_name
    assert parsed.listeners[0].sasl_mode == "passthrough"
    assert spec.without_sasl().security_protocol == "SSL"
    assert spec.librdkafka_config() == {
        "security.protocol": "SASL_SSL",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": str(ca.certificate),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "gateway",
        "sasl.password": "p@ss",
    }
    assert store_settings(parsed).client_config["sasl.password"] == "p@ss"
    assert "p@ss" not in repr(parsed) and "p@ss" not in repr(store_settings(parsed))


def test_ssl_with_sasl_keys_authenticates_over_tls_and_says_so(ca: CertificateAuthority) -> None:
    spec = config(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca.certificate),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "gateway",
            "sasl.password": "x",
        }
    ).upstream_security
    assert spec.security_protocol == "SASL_SSL"
    assert 'write security.protocol = "SASL_SSL"' in spec.warnings[0]
    assert spec.librdkafka_config()["security.protocol"] == "SASL_SSL"
    assert spec.librdkafka_config()["sasl.password"] == "x"
    assert spec.without_sasl().security_protocol == "SSL"
    lone = config({"sasl.username": "gateway"}).upstream_security
    assert lone.security_protocol == "PLAINTEXT" and "not used" in lone.warnings[0]


def test_host_name_check_can_be_turned_off(ca: CertificateAuthority) -> None:
    for value in ("", "none"):
        spec = config(
            {
                "security.protocol": "SSL",
                "ssl.ca.location": str(ca.certificate),
                "ssl.endpoint.identification.algorithm": value,
            }
        ).upstream_security
        assert not spec.verifies_host_name
        assert not client_ssl_context(spec).check_hostname
        assert client_ssl_context(spec).verify_mode == ssl.CERT_REQUIRED
        assert spec.librdkafka_config()["ssl.endpoint.identification.algorithm"] == "none"


def test_oauthbearer_client_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLIENT_SECRET", "shh")
    spec = config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
            "sasl.oauthbearer.client.id": "gw",
            "sasl.oauthbearer.client.secret": "${env:CLIENT_SECRET}",
            "sasl.oauthbearer.scope": "kafka",
        }
    ).upstream_security
    props = spec.librdkafka_config()
    assert props["sasl.oauthbearer.method"] == "oidc"
    assert props["sasl.oauthbearer.client.secret"] == "shh"
    assert "shh" not in repr(spec)


@pytest.mark.parametrize(
    ("upstream", "says"),
    [
        ({"security.protocol": "ssl"}, 'write "SSL"'),
        ({"security.protocol": "TLS"}, "is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"ssl.ca.location": "/x.pem"}, 'does not use TLS: set security.protocol = "SSL"'),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nope.pem"}, "no such file"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "set sasl.mechanism"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
            "choose one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "a",
            },
            "needs sasl.password",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"},
            "needs sasl.oauthbearer.token.endpoint.url",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "a",
                "sasl.password": "${env:QUOTAGATE_TEST_UNSET_VARIABLE}",
            },
            "the environment variable QUOTAGATE_TEST_UNSET_VARIABLE is not set",
        ),
        ({"ssl.endpoint.identification.algorith": "https"}, 'did you mean "ssl.endpoint'),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
            'write "https"',
        ),
        ({"security.protocol": 1}, "must be a string"),
    ],
)
def test_mistakes_say_what_is_wrong_and_how_to_fix_it(upstream: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(upstream)
    assert says in str(caught.value)


def test_tls_material_is_checked_at_start(ca: CertificateAuthority, tmp_path: Path) -> None:
    leaf = ca.issue("gateway")
    other = ca.issue("other")
    with pytest.raises(ConfigError, match="TLS material is unusable"):
        config(
            {
                "security.protocol": "SSL",
                "ssl.certificate.location": str(leaf.certificate),
                "ssl.key.location": str(other.key),
            }
        )
    with pytest.raises(ConfigError, match=r"without ssl\.certificate\.location"):
        config({"security.protocol": "SSL", "ssl.key.location": str(leaf.key)})
    spec = config(
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(leaf.certificate),
            "ssl.key.location": str(leaf.key),
        }
    ).upstream_security
    assert spec.librdkafka_config()["ssl.key.location"] == str(leaf.key)


def test_passthrough_needs_a_sasl_listener() -> None:
    with pytest.raises(ConfigError, match=r"passthrough\" needs a SASL listener"):
        config({}, [{"listen": "127.0.0.1:9192", "sasl.mode": "passthrough"}])
    with pytest.raises(ConfigError, match="is not one of terminate, passthrough"):
        config(
            {},
            [{"listen": "127.0.0.1:9192", "security.protocol": "SASL_SSL", "sasl.mode": "relay"}],
        )


def test_secrets_from_files_and_masking(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "password"
    path.write_text("from-a-file\n")
    secret = resolve_secret("sasl.password", f"${{file:{path}}}")
    assert secret.reveal() == "from-a-file"
    assert pickle.loads(pickle.dumps(secret)) == secret
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("secret %s %r %s", secret, secret, f"{secret}")
    assert "from-a-file" not in caplog.text and "******" in caplog.text
    with pytest.raises(SecretError, match="cannot read the file"):
        resolve_secret("sasl.password", f"${{file:{tmp_path / 'missing'}}}")
    with pytest.raises(SecretError, match="unknown secret provider"):
        resolve_secret("sasl.password", "${vault:x}")
    assert resolve_secret("sasl.password", "plain value").reveal() == "plain value"
