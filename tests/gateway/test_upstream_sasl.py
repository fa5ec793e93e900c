"""The gateway authenticating to its upstream with its own ``[upstream]`` credentials.

tansu has no SASL users we could create, so the broker that decides is a second quotagate in
terminate mode (SCRAM and PLAIN against its credential store) in front of tansu; over
SASL_PLAINTEXT and SASL_SSL. A wrong password is an authentication error on every attempt and
no password ever appears in a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.security import UpstreamSecurity, parse_upstream_security
from support.certificates import CertificateAuthority
from support.clients import confluent_round_trip, new_topic
from support.log_lines import discovery_refusals
from support.sasl_users import sasl_users

pytestmark = pytest.mark.integration

GATEWAY_USER, GATEWAY_PASSWORD = "gateway", "Gw-pa55-=,secret"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("sasl-upstream-ca"))


@pytest.fixture(scope="module")
def deciders(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
    ca: CertificateAuthority,
) -> Iterator[dict[str, BackgroundGateway]]:
    """Terminate-mode gateways in front of tansu: the upstream that checks passwords."""
    passwords = {GATEWAY_USER: GATEWAY_PASSWORD}
    with sasl_users(tmp_path_factory.mktemp("decider") / "users.db", passwords) as store:
        factory = SaslAuthenticatorFactory(store)
        leaf = ca.issue("localhost", dns=("localhost",))
        yield {
            "SASL_PLAINTEXT": start_module_gateway(
                tansu.bootstrap, security_protocol="SASL_PLAINTEXT", authenticator_factory=factory
            ),
            "SASL_SSL": start_module_gateway(
                tansu.bootstrap,
                security_protocol="SASL_SSL",
                listener=leaf.listener_fields(advertised_host="localhost"),
                authenticator_factory=factory,
            ),
        }


def upstream_spec(
    protocol: str, mechanism: str, password: str, ca: CertificateAuthority
) -> UpstreamSecurity:
    keys = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": GATEWAY_USER,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        keys["ssl.ca.location"] = str(ca.certificate)
    return parse_upstream_security(keys)


def decider_address(decider: BackgroundGateway, protocol: str) -> str:
    address = decider.bootstrap
    return f"localhost:{address.port}" if protocol == "SASL_SSL" else str(address)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_gateway_authenticates_to_its_upstream(
    deciders: dict[str, BackgroundGateway],
    start_gateway: Callable[..., BackgroundGateway],
    ca: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    protocol: str,
    mechanism: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    gateway = start_gateway(
        decider_address(deciders[protocol], protocol),
        upstream_security=upstream_spec(protocol, mechanism, GATEWAY_PASSWORD, ca),
    )
    plain = {"bootstrap.servers": str(gateway.bootstrap)}
    topic = new_topic(plain, "gw-sasl")
    values = [f"{mechanism}-{i}".encode() for i in range(20)]
    received = confluent_round_trip(plain, topic, values, wait_for, skip_errors=True)
    assert sorted(received) == sorted(values)
    # The decider saw the gateway's own principal on the client links.
    assert any(f"principal=User:{GATEWAY_USER}" in r.getMessage() for r in caplog.records)
    assert GATEWAY_PASSWORD not in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_an_authentication_error_every_time(
    deciders: dict[str, BackgroundGateway],
    start_gateway: Callable[..., BackgroundGateway],
    ca: CertificateAuthority,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mechanism: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    monkeypatch.setenv("QUOTAGATE_TEST_UPSTREAM_PASSWORD", "not-the-Password-42")
    start_gateway(
        str(deciders["SASL_PLAINTEXT"].bootstrap),
        upstream_security=upstream_spec(
            "SASL_PLAINTEXT", mechanism, "${env:QUOTAGATE_TEST_UPSTREAM_PASSWORD}", ca
        ),
    )

    wait_for(lambda: len(discovery_refusals(caplog)) >= 2, 20, "two refused discovery attempts")
    assert all("SASL: the broker refused the" in line for line in discovery_refusals(caplog))
    assert "not-the-Password-42" not in caplog.text
