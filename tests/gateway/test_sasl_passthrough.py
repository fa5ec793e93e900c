"""SASL passed through to an authenticating upstream, with real clients.

The upstream that decides is a second quotagate in terminate mode (tansu has no SASL users to
create) holding alice's, bob's and the gateway's passwords. The gateway under test has a
SASL_PLAINTEXT listener with ``sasl.mode = "passthrough"``, holds no client password, and
authenticates its own discovery with ``[upstream]`` SCRAM-SHA-512 credentials from
``${env:…}``. It learns each client's principal from the exchange: a ``producer_byte_rate``
on ``User:alice`` holds alice while bob runs free.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.errors import KafkaError as KpKafkaError
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.sasl_handshake import v0 as handshake_v0
from kio.schema.sasl_handshake import v1 as handshake_v1

from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.security import UpstreamSecurity, parse_upstream_security
from quotagate.protocol import codec
from quotagate.store.quotas import Change
from support import bounds
from support.certificates import CertificateAuthority
from support.clients import (
    aiokafka_round_trip,
    authentication_error,
    confluent_round_trip,
    kafka_python_names,
    kafka_python_round_trip,
    kafkajs,
    kcat,
    new_topic,
)
from support.gateways import gateway_config, quota_gateway
from support.sasl_users import sasl_users

pytestmark = pytest.mark.integration

PASSWORDS = {"alice": "Alice-pw-1", "bob": "Bob-pw-2", "gateway": "Gateway-pw-3"}
QUOTA = 100_000  # alice's producer_byte_rate, bytes/s
RECORD = b"v" * 10_000
GREEDY_BYTES = 500_000  # five seconds of alice's quota
BATCH_BYTES = 20_000
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


@pytest.fixture(scope="module")
def decider(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
) -> Iterator[BackgroundGateway]:
    """The upstream that decides: a quotagate terminating SASL against its own users."""
    with sasl_users(tmp_path_factory.mktemp("decider") / "users.db", PASSWORDS) as users:
        yield start_module_gateway(
            tansu.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            authenticator_factory=SaslAuthenticatorFactory(users),
            log_refusals_interval_ms=0,  # each test reads its own refusal's line
        )


def gateway_security() -> UpstreamSecurity:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("QUOTAGATE_TEST_GATEWAY_PASSWORD", PASSWORDS["gateway"])
        return parse_upstream_security(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "gateway",
                "sasl.password": "${env:QUOTAGATE_TEST_GATEWAY_PASSWORD}",
            }
        )


@pytest.fixture(scope="module")
def passthrough(
    tmp_path_factory: pytest.TempPathFactory, decider: BackgroundGateway
) -> Iterator[BackgroundGateway]:
    """SASL_PLAINTEXT passthrough listener, with a producer_byte_rate on User:alice."""
    config = gateway_config(
        str(decider.bootstrap),
        security_protocol="SASL_PLAINTEXT",
        listener={"sasl_mode": "passthrough"},
        upstream_security=gateway_security(),
        store_path=str(tmp_path_factory.mktemp("front") / "front.db"),
        extra={"quotas": WINDOWS},
        # Every test's clients come from 127.0.0.1: each refusal gets its line, so that a test
        # can read its own (the one-line-per-address limit is tests/gateway/test_refusals.py's).
        log_refusals_interval_ms=0,
    )
    with quota_gateway(
        config, [Change({"user": "alice"}, "producer_byte_rate", float(QUOTA))]
    ) as front:
        yield front.background


@pytest.fixture(scope="module")
def passthrough_ssl(
    tmp_path_factory: pytest.TempPathFactory,
    decider: BackgroundGateway,
    start_module_gateway: Callable[..., BackgroundGateway],
) -> tuple[BackgroundGateway, Path]:
    """SASL_SSL passthrough listener; returns it and the CA its clients trust."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("passthrough-ca"))
    front = start_module_gateway(
        str(decider.bootstrap),
        security_protocol="SASL_SSL",
        listener=ca.server().listener_fields(sasl_mode="passthrough"),
        upstream_security=gateway_security(),
    )
    return front, ca.certificate


def ck_config(
    gateway: BackgroundGateway,
    user: str,
    mechanism: str,
    password: str = "",
    ca: Path | None = None,
) -> dict[str, Any]:
    config = {
        "bootstrap.servers": str(gateway.bootstrap),
        "security.protocol": "SASL_SSL" if ca else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password or PASSWORDS[user],
    }
    if ca is not None:
        config["ssl.ca.location"] = str(ca)
    return config


VALUES = [f"passthrough-{i}".encode() for i in range(30)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka(passthrough: BackgroundGateway, wait_for: Any, mechanism: str) -> None:
    config = ck_config(passthrough, "bob", mechanism)
    received = confluent_round_trip(config, new_topic(config, "pt"), VALUES, wait_for)
    assert sorted(received) == sorted(VALUES)


@pytest.mark.parametrize(
    "round_trip", [kafka_python_round_trip, aiokafka_round_trip], ids=["kafka-python", "aiokafka"]
)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_python_clients(
    passthrough: BackgroundGateway,
    mechanism: str,
    round_trip: Callable[[dict[str, Any], str, list[bytes]], list[bytes]],
) -> None:
    topic = new_topic(ck_config(passthrough, "bob", mechanism), "pt")
    config = kafka_python_names(ck_config(passthrough, "bob", mechanism))
    received = round_trip(config, topic, VALUES)
    assert sorted(received) == sorted(VALUES)


def greedy_rate(config: dict[str, Any], topic: str) -> tuple[float, float]:
    """Bytes/s a producer achieves sending GREEDY_BYTES as fast as it is let, and the
    seconds it took."""
    producer = Producer({**config, "batch.size": BATCH_BYTES, "linger.ms": 0, "acks": 1})
    producer.produce(topic, value=b"warm-up")
    assert producer.flush(30) == 0
    started = time.monotonic()
    for _ in range(GREEDY_BYTES // len(RECORD)):
        producer.produce(topic, value=RECORD)
        producer.poll(0)
    assert producer.flush(60) == 0
    seconds = time.monotonic() - started
    return GREEDY_BYTES / seconds, seconds


def test_alice_is_held_to_her_quota_while_bob_runs_free(
    passthrough: BackgroundGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    alice = ck_config(passthrough, "alice", "SCRAM-SHA-512")
    bob = ck_config(passthrough, "bob", "SCRAM-SHA-512")
    topic = new_topic(bob, "pt")
    bob_rate, _ = greedy_rate(bob, topic)
    alice_rate, seconds = greedy_rate(alice, topic)
    print(f"alice {alice_rate:.0f} B/s, bob {bob_rate:.0f} B/s, quota {QUOTA} B/s")
    # Her 7-byte warm-up record opened her sensor just before: measured as from her first
    # request, her last batch's throttle unwaited (support/bounds.py).
    ceiling = bounds.ceiling(
        seconds, WINDOWS, quota=QUOTA, in_flight_bytes=BATCH_BYTES, from_first_request=True
    )
    assert 0.95 * QUOTA <= alice_rate <= ceiling * QUOTA, f"alice {alice_rate:.0f} B/s"
    assert bob_rate > 3 * QUOTA, f"bob {bob_rate:.0f} B/s"
    for password in PASSWORDS.values():
        assert password not in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_an_authentication_failure_at_the_client(
    passthrough: BackgroundGateway, wait_for: Any, mechanism: str
) -> None:
    message = authentication_error(ck_config(passthrough, "alice", mechanism, "wrong-pw"), wait_for)
    # The upstream's own refusal, as it sent it.
    assert "Authentication failed" in message


def test_kafka_python_wrong_password(
    passthrough: BackgroundGateway, caplog: pytest.LogCaptureFixture
) -> None:
    # kafka-python retries a bootstrap that failed authentication until its bootstrap timeout
    # (30 s by default) and then reports only the timeout; the upstream's refusal is in its
    # log. A 2 s timeout sees several refusals.
    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KpKafkaError):
        KafkaProducer(
            bootstrap_servers=str(passthrough.bootstrap),
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password="wrong-pw",
            max_block_ms=5000,
            bootstrap_timeout_ms=2000,
        ).send("never", b"x").get(timeout=10)
    causes = [
        r.getMessage() for r in caplog.records if "SaslAuthenticationFailed" in r.getMessage()
    ]
    assert causes, "kafka-python never saw SASL_AUTHENTICATION_FAILED"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_kafka_over_a_sasl_ssl_passthrough_listener(
    passthrough_ssl: tuple[BackgroundGateway, Path], wait_for: Any, mechanism: str
) -> None:
    gateway, ca = passthrough_ssl
    config = ck_config(gateway, "bob", mechanism, ca=ca)
    topic = new_topic(config, "pt")
    received = confluent_round_trip(config, topic, VALUES, wait_for, skip_errors=True)
    assert sorted(received) == sorted(VALUES)
    authentication_error(ck_config(gateway, "bob", mechanism, "nope", ca), wait_for)


# PLAIN: Debian's kcat with SCRAM is refused, test_kcat_scram_is_refused_as_by_kafka_4.
@pytest.mark.parametrize("mechanism", ["PLAIN"])
def test_kcat(passthrough: BackgroundGateway, mechanism: str) -> None:
    topic = new_topic(ck_config(passthrough, "bob", mechanism), "pt")
    common = [
        *("-b", str(passthrough.bootstrap), "-X", "security.protocol=SASL_PLAINTEXT"),
        *("-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=bob"),
        *("-X", f"sasl.password={PASSWORDS['bob']}"),
    ]
    lines = "\n".join(v.decode() for v in VALUES) + "\n"
    kcat(*common, "-P", "-t", topic, "-X", "acks=all", stdin=lines)
    consumed = kcat(*common, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert sorted(consumed.split()) == sorted(v.decode() for v in VALUES)


@pytest.mark.parametrize("through", ["terminate", "passthrough"])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_scram_is_refused_as_by_kafka_4(
    decider: BackgroundGateway,
    passthrough: BackgroundGateway,
    caplog: pytest.LogCaptureFixture,
    mechanism: str,
    through: str,
) -> None:
    """Debian's kcat (librdkafka 2.0.2; fixed in 2.6.1) sends a client-final message whose
    nonce is not the one the server's first message gave it. Kafka 4.x refuses that (3.8.1 to
    3.9 accepted it), and so does the gateway, on every try: the client sees Kafka's SASL
    failure, the log says why (docs/security.md, "Clients")."""
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = decider if through == "terminate" else passthrough
    found = shutil.which("kcat")
    assert found, "Debian's kcat is not installed: run `make test` or `apt-get install -y kcat`"
    done = subprocess.run(
        [
            found, "-L", "-m", "2",
            *("-b", str(gateway.bootstrap), "-X", "security.protocol=SASL_PLAINTEXT"),
            *("-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=bob"),
            *("-X", f"sasl.password={PASSWORDS['bob']}"),
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "SASL authentication error: Authentication failed" in done.stderr, done.stderr
    assert f"invalid credentials with SASL mechanism {mechanism}" in done.stderr, done.stderr
    lines = [r.getMessage() for r in caplog.records if r.name == "quotagate.gateway.refusals"]
    assert any("Invalid client nonce in the final client message." in line for line in lines)
    assert not [line for line in caplog.messages if PASSWORDS["bob"] in line]


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-256", "scram-sha-512"])
def test_kafkajs(passthrough: BackgroundGateway, mechanism: str) -> None:
    topic = f"pt-kafkajs-{uuid.uuid4().hex[:8]}"
    sasl = {"mechanism": mechanism, "username": "bob", "password": PASSWORDS["bob"]}
    done = kafkajs(
        *("round-trip", str(passthrough.bootstrap), topic, "50", f"group-{topic}"),
        env={"KAFKAJS_SASL": json.dumps(sasl)},
    )
    assert done == {
        "created": True,
        "produced": 50,
        "consumed": 50,
        "exactlyOnce": True,
        "deleted": True,
    }


def _closed_without_answer(gateway: BackgroundGateway, frame: bytes) -> bool:
    address = gateway.bootstrap
    with socket.create_connection((address.host, address.port), timeout=10) as sock:
        sock.sendall(frame)
        return sock.recv(4) == b""


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            metadata_v12.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            "api_key=3 before SASL authentication",
        ),
        (handshake_v0.SaslHandshakeRequest(mechanism="PLAIN"), "v0 cannot be passed through"),
        (handshake_v1.SaslHandshakeRequest(mechanism="GSSAPI"), "'GSSAPI' cannot be passed"),
    ],
    ids=["metadata-before-authentication", "handshake-v0", "unreadable-mechanism"],
)
def test_what_passthrough_cannot_allow_closes_the_connection(
    passthrough: BackgroundGateway,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
    body: Any,
    reason: str,
) -> None:
    """Closed by the gateway itself, with its reason logged as a refusal (at WARNING, as in
    terminate mode); nothing reaches the upstream."""
    caplog.set_level(logging.INFO, logger="quotagate")
    assert _closed_without_answer(passthrough, codec.encode_request_frame(body, 1, "probe"))
    wait_for(lambda: reason in caplog.text, 10, f"the log line saying {reason!r}")
    (record,) = [r for r in caplog.records if reason in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("event=authentication_failed listener=SASL_PLAINTEXT")
