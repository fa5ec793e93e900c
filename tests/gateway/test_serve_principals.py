"""``quotagate serve`` from a config file with the principal keys, as an operator writes them.

Three listeners in front of tansu: SSL requiring client certificates mapped with
``ssl.principal.mapping.rules``; SASL_PLAINTEXT with OAUTHBEARER against the test's JWKS; and
SASL_SSL requiring certificates too, where, as in Kafka, the SASL principal wins over the
certificate's. Real confluent-kafka clients; the principals are read from serve's log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from quotagate.gateway.embedded import TansuBroker, free_port
from support.certificates import CertificateAuthority
from support.oauth import AUDIENCE, ISSUER, IdentityProvider
from support.served import Served

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, tansu: TansuBroker) -> Iterator[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("serve-principals")
    authority = CertificateAuthority(directory)
    server = authority.server()
    ports = {name: free_port() for name in ("mtls", "oauth", "both")}
    with IdentityProvider().serving() as provider:
        provider.clients["alice"] = "alice-S3cret"
        text = "\n".join(
            [
                f'[upstream]\nbootstrap.servers = "{tansu.bootstrap}"',
                f'[store]\npath = "{directory / "quotagate.db"}"',
                '[log]\nlevel = "INFO"',
                "[[listeners]]",
                'name = "MTLS"',
                f'listen = "127.0.0.1:{ports["mtls"]}"',
                f"broker.port.start = {free_port()}",
                "broker.node.id.start = 111",
                "broker.port.count = 1",
                'security.protocol = "SSL"',
                f'ssl.certificate.location = "{server.certificate}"',
                f'ssl.key.location = "{server.key}"',
                'ssl.client.auth = "required"',
                f'ssl.ca.location = "{authority.certificate}"',
                'ssl.principal.mapping.rules = "RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT"',
                "[[listeners]]",
                'name = "OAUTH"',
                f'listen = "127.0.0.1:{ports["oauth"]}"',
                f"broker.port.start = {free_port()}",
                "broker.node.id.start = 111",
                "broker.port.count = 1",
                'security.protocol = "SASL_PLAINTEXT"',
                'sasl.enabled.mechanisms = ["OAUTHBEARER"]',
                f'sasl.oauthbearer.jwks.endpoint.url = "{provider.jwks_url}"',
                f'sasl.oauthbearer.expected.audience = "{AUDIENCE}"',
                f'sasl.oauthbearer.expected.issuer = "{ISSUER}"',
                "[[listeners]]",
                'name = "BOTH"',
                f'listen = "127.0.0.1:{ports["both"]}"',
                f"broker.port.start = {free_port()}",
                "broker.node.id.start = 111",
                "broker.port.count = 1",
                'security.protocol = "SASL_SSL"',
                f'ssl.certificate.location = "{server.certificate}"',
                f'ssl.key.location = "{server.key}"',
                'ssl.client.auth = "required"',
                f'ssl.ca.location = "{authority.certificate}"',
                'sasl.enabled.mechanisms = ["OAUTHBEARER"]',
                f'sasl.oauthbearer.jwks.endpoint.url = "{provider.jwks_url}"',
                f'sasl.oauthbearer.expected.audience = "{AUDIENCE}"',
                "",
            ]
        )
        config = directory / "gateway.toml"
        config.write_text(text, encoding="utf-8")
        served = Served(config)
        try:
            yield {
                "served": served,
                "ports": ports,
                "ca": authority.certificate,
                "alice": authority.client("CN=alice,OU=eng,O=corp", "alice"),
                "provider": provider,
            }
        finally:
            served.stop()


def _wait_for_line(served: Served, text: str, seconds: float = 30) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for line in served.lines:
            if text in line:
                return line
        if served.process.poll() is not None:
            break
        time.sleep(0.1)  # polling serve's output, not timing the gateway
    raise AssertionError(f"no line with {text!r}:\n{served.output()[-4000:]}")


def _metadata(config: dict[str, Any]) -> None:
    AdminClient(config).list_topics(timeout=30)


def test_ssl_client_certificate_names_the_principal(setup: dict[str, Any]) -> None:
    _wait_for_line(setup["served"], "listener_started listener=MTLS")
    _metadata(
        {
            "bootstrap.servers": f"127.0.0.1:{setup['ports']['mtls']}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(setup["ca"]),
            "ssl.certificate.location": str(setup["alice"].certificate),
            "ssl.key.location": str(setup["alice"].key),
        }
    )
    line = _wait_for_line(setup["served"], "event=tls_principal")
    assert "listener=MTLS principal=User:alice" in line


def test_oauthbearer_token_names_the_principal(setup: dict[str, Any]) -> None:
    provider: IdentityProvider = setup["provider"]
    _wait_for_line(setup["served"], "listener_started listener=OAUTH")
    _metadata(provider.client_config(f"127.0.0.1:{setup['ports']['oauth']}", "alice"))
    _wait_for_line(setup["served"], "authenticated as User:alice via OAUTHBEARER on listener OAUTH")
    assert "alice-S3cret" not in setup["served"].output()


def _sasl_ssl(setup: dict[str, Any], token: str, with_certificate: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{setup['ports']['both']}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(setup["ca"]),
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (token, time.time() + 3600),
    }
    if with_certificate:
        config["ssl.certificate.location"] = str(setup["alice"].certificate)
        config["ssl.key.location"] = str(setup["alice"].key)
    return config


def test_on_sasl_ssl_the_sasl_principal_wins_over_the_certificate(setup: dict[str, Any]) -> None:
    provider: IdentityProvider = setup["provider"]
    _wait_for_line(setup["served"], "listener_started listener=BOTH")
    producer = Producer(_sasl_ssl(setup, provider.mint("bob"), with_certificate=True))
    producer.produce("sasl-wins", b"x")
    assert producer.flush(30) == 0
    _wait_for_line(setup["served"], "authenticated as User:bob via OAUTHBEARER on listener BOTH")


def test_on_sasl_ssl_a_required_certificate_is_still_required(setup: dict[str, Any]) -> None:
    provider: IdentityProvider = setup["provider"]
    _wait_for_line(setup["served"], "listener_started listener=BOTH")
    marker = "via OAUTHBEARER on listener BOTH"
    before = setup["served"].output().count(marker)
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **_sasl_ssl(setup, provider.mint("bob"), with_certificate=False),
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "the client without a certificate was not refused"
    producer.flush(0)
    assert setup["served"].output().count(marker) == before  # it never got to SASL
