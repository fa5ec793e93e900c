"""OAUTHBEARER end to end through an upstream that validates tokens itself.

The upstream that decides is a second quotagate in terminate mode with OAUTHBEARER only (KIP-768
validation against the JWKS, expected audience and issuer), in front of tansu. The test is the
identity provider (support.oauth: keys made by the test, a JWKS and a client-credentials token
endpoint on loopback).

(a) The gateway authenticates to that upstream itself: ``[upstream] sasl.mechanism =
"OAUTHBEARER"`` with the client-credentials flow (token endpoint, client id, ``${env:}`` client
secret, scope); clients on its PLAINTEXT listener produce and consume, and the upstream names
every link ``User:quotagate-gw``. A wrong client secret is refused by the token endpoint and
logged at ERROR on every attempt, never the secret. The fleet's topics (librdkafka) log in
with the same client credentials.

(b) A passthrough listener in front of the same upstream: confluent-kafka clients with OIDC
tokens for ``sub=alice`` and ``sub=bob`` authenticate to the upstream through the gateway; the
gateway names them from the token the upstream accepted, and a ``producer_byte_rate`` on
``User:alice`` holds alice to 0.95-1.05 x (measured from the gateway's usage events, as the
other quota tests measure) while bob runs free; kafka-python and aiokafka, each with a token of
its own, produce and consume through it and are named by it. Expired, wrong-audience and
wrongly signed tokens are refused by the upstream, and that refusal reaches the client as an
authentication error.

Every log line of both gateways (one process, read whole at DEBUG) is searched for every
secret and every token, and every part of a token.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.net.sasl.oauth import AbstractTokenProvider as KpTokenProvider

from quotagate.fleet.topic_log import TopicLog
from quotagate.gateway.upstream_security import UpstreamSecurity, parse_upstream_security
from quotagate.store.quotas import Change
from support.greedy import assert_held, measured_rate, race, usage_rows
from support.oauth import AUDIENCE, ISSUER, IdentityProvider, SigningKey

pytestmark = pytest.mark.integration

QUOTA = 300_000
WHO = ("alice", "bob")
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
GATEWAY_CLIENT = "quotagate-gw"
GATEWAY_SCOPE = "kafka.gateway"
SECRETS = {
    "alice": "alice-oidc-S3cret",
    "bob": "bob-oidc-S3cret",
    GATEWAY_CLIENT: "gateway-oidc-S3cret",
}
SECRET_ENV = "QUOTAGATE_TEST_OAUTH_CLIENT_SECRET"


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        served.clients.update(SECRETS)
        yield served


@pytest.fixture
def decider(quota_tansu: Any, start_quota_gateway: Any, provider: IdentityProvider) -> Any:
    """The upstream that decides: OAUTHBEARER terminated and validated (KIP-768)."""
    return start_quota_gateway(
        quota_tansu.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        listener={
            "sasl_enabled_mechanisms": ("OAUTHBEARER",),
            "oauthbearer_jwks_endpoint_url": provider.jwks_url,
            "oauthbearer_expected_audience": (AUDIENCE,),
            "oauthbearer_expected_issuer": ISSUER,
        },
        sasl=True,
    )


def gateway_security(
    provider: IdentityProvider, monkeypatch: pytest.MonkeyPatch, secret: str
) -> UpstreamSecurity:
    """``[upstream]`` as a user writes it, the client secret from the environment."""
    monkeypatch.setenv(SECRET_ENV, secret)
    return parse_upstream_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": provider.token_url,
            "sasl.oauthbearer.client.id": GATEWAY_CLIENT,
            "sasl.oauthbearer.client.secret": f"${{env:{SECRET_ENV}}}",
            "sasl.oauthbearer.scope": GATEWAY_SCOPE,
        }
    )


def _oidc(bootstrap: str, provider: IdentityProvider, client: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client,
        "sasl.oauthbearer.client.secret": SECRETS[client],
        "sasl.oauthbearer.token.endpoint.url": provider.token_url,
    }


def _handing(bootstrap: str, token: str) -> dict[str, Any]:
    """A client that presents ``token`` as it is (librdkafka sends what oauth_cb gives)."""

    def oauth_cb(_config: str) -> tuple[str, float]:
        return token, time.time() + 3600

    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }


def _lines(caplog: pytest.LogCaptureFixture, logger: str = "") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith(logger or "quotagate")]


def _assert_no_secret(
    caplog: pytest.LogCaptureFixture, provider: IdentityProvider, *tokens: str
) -> None:
    log = "\n".join(_lines(caplog))
    assert log, "nothing was logged: the search below would prove nothing"
    for secret in SECRETS.values():
        assert secret not in log
    for token in (*provider.issued, *tokens):
        for section in token.split("."):
            assert section not in log  # neither the token nor any part of it


def _new_topic(config: dict[str, Any]) -> str:
    topic = f"oauth-up-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)  # held: a collected client cancels its futures
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    return topic


def _authenticated_by_decider(caplog: pytest.LogCaptureFixture, principal: str) -> bool:
    # The terminating side's own line: "SASL: <peer> authenticated as <principal> via ..."
    return any(
        f"authenticated as {principal} via OAUTHBEARER" in line
        for line in _lines(caplog, "quotagate.gateway.auth.sasl")
    )


# -- (a) the gateway's own OAUTHBEARER client credentials ------------------------------------


def test_the_gateway_authenticates_to_its_upstream_with_client_credentials(
    decider: Any,
    start_quota_gateway: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    wait_for: Callable[..., Any],
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    gateway = start_quota_gateway(
        decider.bootstrap,
        upstream_security=gateway_security(provider, monkeypatch, SECRETS[GATEWAY_CLIENT]),
    )
    plain = {"bootstrap.servers": gateway.bootstrap}
    topic = _new_topic(plain)
    values = [f"gw-oauth-{i}".encode() for i in range(30)]
    producer = Producer({**plain, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**plain, "group.id": f"g-{topic}"})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    received: list[bytes] = []

    def drained() -> bool:
        received.extend(m.value() for m in consumer.consume(100, 1.0) if m.error() is None)
        return len(received) >= len(values)

    wait_for(drained, 30, "every message back")
    consumer.close()
    assert sorted(received) == sorted(values)
    # The token endpoint saw the gateway's client-credentials request with its scope, and
    # the upstream validated that token and named the gateway by it.
    assert (GATEWAY_CLIENT, GATEWAY_SCOPE) in provider.granted
    assert _authenticated_by_decider(caplog, f"User:{GATEWAY_CLIENT}")
    _assert_no_secret(caplog, provider)


def test_a_wrong_client_secret_is_refused_every_attempt_and_never_logged(
    decider: Any,
    start_quota_gateway: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    wait_for: Callable[..., Any],
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    wrong = "not-the-gateway-S3cret"
    start_quota_gateway(
        decider.bootstrap, upstream_security=gateway_security(provider, monkeypatch, wrong)
    )

    def refusals() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.ERROR and "upstream_discovery_failed" in r.getMessage()
        ]

    wait_for(lambda: len(refusals()) >= 2, 20, "two refused discovery attempts")
    # ERROR, as a refused password: waiting will not fix it. The endpoint's RFC 6749 error
    # code is shown, never the secret.
    expected = f"SASL: OAUTHBEARER: token endpoint {provider.token_url} answered HTTP 401"
    assert all(f"{expected} (invalid_client)" in line for line in refusals()), refusals()
    assert wrong not in "\n".join(_lines(caplog))
    _assert_no_secret(caplog, provider)


def test_the_fleet_topics_log_in_with_the_same_client_credentials(
    decider: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store's and usage exchange's librdkafka clients get the same spec, translated to
    librdkafka's own OIDC client-credentials flow."""
    caplog.set_level(logging.DEBUG, logger="quotagate")
    security = gateway_security(provider, monkeypatch, SECRETS[GATEWAY_CLIENT])
    config = security.librdkafka_config()
    topic = f"_quotagate.oauth-{uuid.uuid4().hex[:8]}.config"
    granted_before = len(provider.granted)
    writer = TopicLog(decider.bootstrap, topic, topic_config={}, client_config=config)
    writer.start_in_thread(lambda key, value: None)
    try:
        writer.append_and_wait(b"k", b"over oauthbearer")
    finally:
        writer.close_in_thread()
    seen: list[tuple[bytes | None, bytes | None]] = []
    reader = TopicLog(decider.bootstrap, topic, topic_config={}, client_config=config)
    reader.start_in_thread(lambda key, value: seen.append((key, value)))
    reader.close_in_thread()
    assert seen == [(b"k", b"over oauthbearer")]
    assert (GATEWAY_CLIENT, GATEWAY_SCOPE) in provider.granted[granted_before:]
    assert _authenticated_by_decider(caplog, f"User:{GATEWAY_CLIENT}")
    _assert_no_secret(caplog, provider)


# -- (b) passthrough: the upstream validates the clients' own tokens --------------------------


@pytest.fixture
def passthrough(
    decider: Any,
    start_quota_gateway: Any,
    provider: IdentityProvider,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Any:
    return start_quota_gateway(
        decider.bootstrap,
        quotas=WINDOWS,
        usage={"path": str(tmp_path / "usage")},
        security_protocol="SASL_PLAINTEXT",
        listener={"sasl_mode": "passthrough"},
        upstream_security=gateway_security(provider, monkeypatch, SECRETS[GATEWAY_CLIENT]),
    )


def test_alice_is_held_to_her_user_quota_through_passthrough_and_bob_is_not(
    passthrough: Any,
    provider: IdentityProvider,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    passthrough.runtime.alter_client_quotas(
        [Change({"user": "alice"}, "producer_byte_rate", float(QUOTA))], "test", "test"
    )
    topic = _new_topic(_oidc(passthrough.bootstrap, provider, "bob"))
    configs = {who: _oidc(passthrough.bootstrap, provider, who) for who in WHO}
    measured_from = race(configs, topic)
    passthrough.stop()
    rows = usage_rows(tmp_path / "usage")
    assert_held(measured_rate(rows, "User:alice", measured_from), QUOTA)
    assert measured_rate(rows, "User:bob", measured_from) > 1.5 * QUOTA
    # ApiVersions, answered before authentication, is recorded without a principal.
    assert {r["principal"] for r in rows} - {""} == {"User:alice", "User:bob"}
    # The upstream saw the clients themselves (its ACLs could act on them), and the gateway's
    # own connections as the gateway.
    for principal in ("User:alice", "User:bob", f"User:{GATEWAY_CLIENT}"):
        assert _authenticated_by_decider(caplog, principal), principal
    assert {client for client, _ in provider.granted} >= {"alice", "bob", GATEWAY_CLIENT}
    _assert_no_secret(caplog, provider)


class _KafkaPythonToken(KpTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


class _AioKafkaToken(AioTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


VALUES = [f"oauth-pt-{i}".encode() for i in range(20)]


def _kafka_python_round_trip(bootstrap: str, topic: str, token: str) -> list[bytes]:
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": _KafkaPythonToken(token),
    }
    producer = KafkaProducer(**config, acks="all")
    for future in [producer.send(topic, value) for value in VALUES]:
        future.get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**config, consumer_timeout_ms=10_000)
    consumer.assign([KpTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    received: list[bytes] = []
    for record in consumer:
        received.append(record.value)
        if len(received) == len(VALUES):
            break
    consumer.close()
    return received


def _aiokafka_round_trip(bootstrap: str, topic: str, token: str) -> list[bytes]:
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": _AioKafkaToken(token),
    }

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config, acks="all")
        await producer.start()
        try:
            for value in VALUES:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**config)
        await consumer.start()
        received: list[bytes] = []
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            while len(received) < len(VALUES):
                batches = await consumer.getmany(timeout_ms=1000)
                received += [r.value for rs in batches.values() for r in rs if r.value]
        finally:
            await consumer.stop()
        return received

    return asyncio.run(asyncio.wait_for(run(), 60))


ROUND_TRIPS: dict[str, Callable[[str, str, str], list[bytes]]] = {
    "kafka-python": _kafka_python_round_trip,
    "aiokafka": _aiokafka_round_trip,
}


@pytest.mark.parametrize("client", sorted(ROUND_TRIPS))
def test_python_clients_through_passthrough_with_their_own_tokens(
    passthrough: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    client: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    who = f"carol-{client}"
    token = provider.mint(who)
    topic = _new_topic(_oidc(passthrough.bootstrap, provider, "bob"))
    received = ROUND_TRIPS[client](passthrough.bootstrap, topic, token)
    assert sorted(received) == sorted(VALUES)
    # Validated by the upstream, named by the gateway from the same token.
    assert _authenticated_by_decider(caplog, f"User:{who}")
    assert any(
        "event=authenticated" in line and f"principal=User:{who}" in line
        for line in _lines(caplog, "quotagate.gateway.connection")
    )
    _assert_no_secret(caplog, provider, token)


REFUSED: dict[str, tuple[Callable[[IdentityProvider], str], str]] = {
    "expired": (
        lambda p: p.mint("alice", issued_at=time.time() - 7200, expires_in=3600),
        "The JWT is no longer valid",
    ),
    "wrong audience": (
        lambda p: p.mint("alice", audience="web"),
        "doesn't contain an acceptable identifier",
    ),
    "bad signature": (
        lambda p: p.mint("alice", key=SigningKey(p.key.key_id)),
        "Signature verification failed",
    ),
}


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_the_upstreams_refusal_reaches_the_client_as_an_authentication_error(
    passthrough: Any,
    provider: IdentityProvider,
    caplog: pytest.LogCaptureFixture,
    why: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    mint, reason = REFUSED[why]
    token = mint(provider)
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **_handing(passthrough.bootstrap, token),
            "error_cb": errors.append,
            "message.timeout.ms": 3000,
        }
    )
    deadline = time.time() + 15
    while time.time() < deadline and not any(
        e.code() == KafkaError._AUTHENTICATION for e in errors
    ):
        producer.poll(0.2)
    producer.flush(0)
    refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert refused, [e.str() for e in errors]
    # The upstream's own answer (RFC 7628's error status), relayed as it sent it.
    assert "invalid_token" in refused[0].str()
    decider_lines = _lines(caplog, "quotagate.gateway.auth.oauthbearer")
    assert any("oauthbearer_token_refused" in line and reason in line for line in decider_lines)
    gateway_lines = _lines(caplog, "quotagate.gateway.connection")
    assert any("sasl_passthrough_refused" in line for line in gateway_lines)
    # Neither side took the name the refused token claimed.
    assert not any("User:alice" in line for line in _lines(caplog))
    _assert_no_secret(caplog, provider, token)
