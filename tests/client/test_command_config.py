"""``--command-config``: the CLI reaches a gateway that demands TLS and SCRAM, with a client
properties file as Kafka's tools take it (``sasl.jaas.config`` included)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.commands.command_config import (
    CommandConfigError,
    read_properties,
    security_from_properties,
)
from quotagate.enforcement import QuotaEnforcement, QuotaRuntime
from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.store.credentials import CredentialStore
from support.certificates import CertificateAuthority
from support.gateways import gateway_config

PASSWORD = "Cli-Pa55word"


def properties(ca: Path, password: str = PASSWORD) -> str:
    return (
        "# as for kafka-configs --command-config\n"
        "security.protocol=SASL_SSL\n"
        f"ssl.ca.location={ca}\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{password}";\n'
    )


def test_properties_and_jaas_are_read(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    spec = security_from_properties(read_properties(properties(ca.certificate)))
    assert (spec.security_protocol, spec.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert spec.sasl_username == "admin" and spec.sasl_password is not None
    assert spec.sasl_password.reveal() == PASSWORD
    assert read_properties("a = b\nc: d\n! comment\n") == {"a": "b", "c": "d"}


def test_mistakes_are_explained(tmp_path: Path) -> None:
    with pytest.raises(CommandConfigError, match="unknown key"):
        security_from_properties({"security.protocl": "SSL"})
    with pytest.raises(CommandConfigError, match="line 1 is not key=value"):
        read_properties("just words\n")
    bad = tmp_path / "client.properties"
    bad.write_text("security.protocol=SASL_SSL\n")
    result = CliRunner().invoke(
        app,
        [
            "topics",
            "delete",
            "t",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--command-config",
            str(bad),
        ],
    )
    assert result.exit_code == 2
    assert "set sasl.mechanism" in result.output


@pytest.mark.integration
def test_topics_and_quotas_through_a_secured_gateway(
    tmp_path: Path, tansu: TansuBroker, start_gateway: Callable[..., BackgroundGateway]
) -> None:
    ca = CertificateAuthority(tmp_path)
    leaf = ca.issue("localhost", dns=("localhost",))
    users = CredentialStore.open(tmp_path / "users.db")
    users.set_password("admin", PASSWORD, iterations=4096)
    runtime = QuotaRuntime.from_config(
        gateway_config(
            tansu.bootstrap,
            store_path=str(tmp_path / "quotas.db"),
            extra={"quotas": {"super.users": ["User:admin"]}},
        )
    )
    gateway = start_gateway(
        tansu.bootstrap,
        security_protocol="SASL_SSL",
        listener={
            "ssl_certificate_location": str(leaf.certificate),
            "ssl_key_location": str(leaf.key),
            "advertised_host": "localhost",
        },
        authenticator_factory=SaslAuthenticatorFactory(users),
        plugins=[QuotaEnforcement(runtime)],
    )
    bootstrap = str(gateway.bootstrap)
    good, wrong = tmp_path / "client.properties", tmp_path / "wrong.properties"
    good.write_text(properties(ca.certificate))
    wrong.write_text(properties(ca.certificate, "not-it"))
    runner = CliRunner()
    topic = f"cli-secured-{uuid.uuid4().hex[:8]}"
    created = runner.invoke(
        app, ["topics", "create", topic, "-b", bootstrap, "--command-config", str(good)]
    )
    assert created.exit_code == 0, created.output
    assert f"Created topic {topic}." in created.stdout
    altered = runner.invoke(
        app,
        [
            *("quotas", "alter", "-b", bootstrap, "--command-config", str(good)),
            *("--add-config", "producer_byte_rate=1024", "--entity-type", "users"),
            *("--entity-name", "alice"),
        ],
    )
    assert altered.exit_code == 0, altered.output
    described = runner.invoke(
        app, ["quotas", "describe", "-b", bootstrap, "--command-config", str(good)]
    )
    assert described.exit_code == 0, described.output
    assert "producer_byte_rate=1024" in described.stdout
    refused = runner.invoke(
        app,
        [
            *("topics", "delete", topic, "-b", bootstrap, "--timeout-ms", "3000"),
            *("--command-config", str(wrong)),
        ],
    )
    assert refused.exit_code == 1
    assert "refused the SCRAM-SHA-512 credentials" in refused.output
    assert "not-it" not in refused.output
    users.close()
