"""Client certificates name the user a quota holds: mTLS through the real gateway to tansu.

A CA, the gateway's certificate and two client certificates (``CN=alice,OU=eng,O=corp`` and
``CN=bob,OU=eng,O=corp``) are made by the test; the SSL listener requires client
certificates and maps subjects with ``RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT``. A
``producer_byte_rate`` on ``User:alice`` holds alice's greedy confluent-kafka producer to the
quota while bob's runs free. The quota windows are 2 x 1 s, as in test_byte_rates (why there).
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

from support.certificates import CertificateAuthority, Leaf
from support.greedy import assert_alice_held_while_bob_runs_free

pytestmark = pytest.mark.integration

QUOTA = 300_000
WHO = ("alice", "bob")
RULES = "RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT"
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    authority = CertificateAuthority(tmp_path_factory.mktemp("mtls"))
    return {
        "ca": authority.certificate,
        "server": authority.server(),
        "alice": authority.client("CN=alice,OU=eng,O=corp", "alice"),
        "bob": authority.client("CN=bob,OU=eng,O=corp", "bob"),
        "carol": authority.client("OU=sales,O=corp", "carol"),
        "stranger": CertificateAuthority(tmp_path_factory.mktemp("other"), "other CA").client(
            "CN=alice,OU=eng,O=corp", "stranger"
        ),
    }


def _listener(
    pki: dict[str, Any], client_auth: str = "required", rules: str = RULES
) -> dict[str, Any]:
    server: Leaf = pki["server"]
    return server.listener_fields(
        ssl_client_auth=client_auth,
        ssl_ca_location=str(pki["ca"]),
        ssl_principal_mapping_rules=rules,
    )


def _client(bootstrap: str, pki: dict[str, Any], who: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki["ca"]),
    }
    if who is not None:
        issued: Leaf = pki[who]
        config["ssl.certificate.location"] = str(issued.certificate)
        config["ssl.key.location"] = str(issued.key)
    return config


@pytest.fixture
def ssl_gateway(quota_tansu: Any, start_quota_gateway: Any, pki: dict[str, Any]) -> Any:
    """``start(client_auth="required", rules=RULES, **more)``: a quota gateway whose one
    listener is SSL with the test's certificates (``more``: start_quota_gateway's keywords)."""

    def start(client_auth: str = "required", rules: str = RULES, **more: Any) -> Any:
        listener = _listener(pki, client_auth, rules)
        return start_quota_gateway(
            quota_tansu.bootstrap, security_protocol="SSL", listener=listener, **more
        )

    return start


def test_a_user_quota_holds_the_certificate_it_names(
    ssl_gateway: Any, pki: dict[str, Any], tmp_path: Path
) -> None:
    usage = tmp_path / "usage"
    gateway = ssl_gateway(quotas=WINDOWS, usage={"path": str(usage)})
    configs = {who: _client(gateway.bootstrap, pki, who) for who in WHO}
    rows = assert_alice_held_while_bob_runs_free(gateway, configs, usage, QUOTA, WINDOWS)
    assert not [r for r in rows if r["principal"] == "User:bob" and r["throttle_ms"] > 0]
    assert {r["principal"] for r in rows} == {"User:alice", "User:bob"}


def _authentication_error(config: dict[str, Any]) -> list[KafkaError]:
    """The errors a producer reports while it tries to reach the gateway for a few seconds."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "message.timeout.ms": 3000})
    deadline = time.time() + 10
    while time.time() < deadline and not errors:
        producer.poll(0.2)
    producer.flush(0)
    return errors


def _refusals(gateway: Any, reason: str) -> float:
    """``quotagate_authentication_refusals_total`` of the SSL listener for ``reason``."""
    value = gateway.background.gateway.metrics.registry.get_sample_value(
        "quotagate_authentication_refusals_total", {"listener": "SSL", "reason": reason}
    )
    return value or 0.0


def _refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "quotagate.gateway.refusals"]


@pytest.mark.parametrize(
    ("who", "reason", "says"),
    [
        (None, "certificate_missing", "no client certificate"),
        ("stranger", "certificate_untrusted", "unable to get local issuer certificate"),
    ],
)
def test_without_a_trusted_certificate_there_is_no_connection_and_one_line_says_why(
    ssl_gateway: Any,
    pki: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    who: str | None,
    reason: str,
    says: str,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = ssl_gateway()
    errors = _authentication_error(_client(gateway.bootstrap, pki, who))
    assert errors, "the client never reported the refused handshake"
    assert {e.code() for e in errors} <= {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._SSL,
        KafkaError._AUTHENTICATION,
    }, [e.str() for e in errors]
    (line,) = _refusal_lines(caplog)  # however often the client tried
    assert line.startswith("event=certificate_refused listener=SSL client=127.0.0.1:")
    assert f"reason={reason}" in line and says in line
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.getMessage() == line)
    assert _refusals(gateway, reason) >= 1


def test_a_subject_no_rule_maps_is_refused_with_a_log_line(
    ssl_gateway: Any, pki: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = ssl_gateway(rules="RULE:^CN=([a-z]+),.*$/$1/")
    assert _authentication_error(_client(gateway.bootstrap, pki, "carol"))
    (line,) = _refusal_lines(caplog)
    assert "event=certificate_refused" in line and "reason=certificate_unmapped" in line
    assert "Failed to map name for 'OU=sales,O=corp'" in line
    assert _refusals(gateway, "certificate_unmapped") >= 1


def test_requested_without_a_certificate_is_anonymous(
    ssl_gateway: Any, pki: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = ssl_gateway("requested")
    for who, principal in ((None, "User:ANONYMOUS"), ("bob", "User:bob")):
        caplog.clear()
        producer = Producer(_client(gateway.bootstrap, pki, who))
        producer.produce(f"anon-{uuid.uuid4().hex[:6]}", b"x")
        producer.flush(10)
        lines = [r.getMessage() for r in caplog.records if "tls_principal" in r.getMessage()]
        assert lines and all(line.endswith(f"principal={principal}") for line in lines), lines


def test_kafka_python_is_named_by_its_certificate_too(
    ssl_gateway: Any, pki: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Python's ssl module on the client side, where librdkafka uses OpenSSL directly.
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = ssl_gateway()
    alice: Leaf = pki["alice"]
    producer = KafkaProducer(
        bootstrap_servers=gateway.bootstrap,
        security_protocol="SSL",
        ssl_cafile=str(pki["ca"]),
        ssl_certfile=str(alice.certificate),
        ssl_keyfile=str(alice.key),
    )
    try:
        producer.send(f"kp-{uuid.uuid4().hex[:6]}", b"x").get(timeout=30)
    finally:
        producer.close(10)
    lines = [r.getMessage() for r in caplog.records if "tls_principal" in r.getMessage()]
    assert lines and all(line.endswith("principal=User:alice") for line in lines), lines
