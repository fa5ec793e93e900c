"""KIP-368 both ways, with real parts: the upstream that decides is a second quotagate in
terminate mode in front of tansu whose SASL listener sets ``connections.max.reauth.ms`` to
1500 ms; the gateway under test authenticates to it with its own ``[upstream]`` credentials.

(a) A confluent-kafka producer and consumer run through the gateway for 8 s: no connection is
closed anywhere (no reconnect), every message comes back once and in order, and the gateway's
upstream connections re-authenticated several times meanwhile (the decider logs each one);
with SCRAM-SHA-512, and with OAUTHBEARER client credentials against a decider validating the
tokens (KIP-768, the test's identity provider).
(b) A client that authenticates once and keeps sending is closed by the decider once its
session expired, with its log line. (c) A re-authentication as another principal is refused and
closes the connection.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.sasl_authenticate import v2 as authenticate_v2
from kio.schema.sasl_handshake import v1 as handshake_v1

from quotagate.gateway.auth.jwks import JwksCache
from quotagate.gateway.auth.oauthbearer import JwksTokenValidator
from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.security import UpstreamSecurity, parse_upstream_security
from quotagate.protocol import codec
from quotagate.security.oauthbearer import TokenRules
from support import raw_socket
from support.clients import new_topic
from support.log_lines import upstream_reauthentications
from support.oauth import AUDIENCE, ISSUER, IdentityProvider
from support.sasl_users import sasl_users

pytestmark = pytest.mark.integration

MAX_REAUTH_MS = 1500
RUN_S = 8.0
GATEWAY_USER, GATEWAY_PASSWORD = "gateway", "Gw-reauth-secret"
OTHER_USER, OTHER_PASSWORD = "other", "Other-reauth-secret"
LISTENER = "SASL_PLAINTEXT"
OAUTH_CLIENT, OAUTH_SECRET = "quotagate-gw", "gateway-oidc-reauth-S3cret"


@pytest.fixture(scope="module")
def decider(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
) -> Iterator[BackgroundGateway]:
    passwords = {GATEWAY_USER: GATEWAY_PASSWORD, OTHER_USER: OTHER_PASSWORD}
    path: Path = tmp_path_factory.mktemp("reauth-decider") / "users.db"
    with sasl_users(path, passwords) as store:
        factory = SaslAuthenticatorFactory(store, listener_max_reauth_ms={LISTENER: MAX_REAUTH_MS})
        yield start_module_gateway(
            tansu.bootstrap,
            security_protocol=LISTENER,
            listener={"connections_max_reauth_ms": MAX_REAUTH_MS},
            authenticator_factory=factory,
        )


@pytest.fixture(scope="module")
def provider() -> Iterator[IdentityProvider]:
    with IdentityProvider().serving() as served:
        served.clients[OAUTH_CLIENT] = OAUTH_SECRET
        yield served


@pytest.fixture(scope="module")
def oauth_decider(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_gateway: Callable[..., BackgroundGateway],
    tansu: TansuBroker,
    provider: IdentityProvider,
) -> Iterator[BackgroundGateway]:
    """OAUTHBEARER only, tokens validated against the provider's JWKS."""
    keys = JwksCache(provider.jwks_url)
    keys.load()
    rules = TokenRules(expected_audience=(AUDIENCE,), expected_issuer=ISSUER)
    path: Path = tmp_path_factory.mktemp("reauth-oauth") / "users.db"
    with sasl_users(path, {}) as store:
        factory = SaslAuthenticatorFactory(
            store,
            ("OAUTHBEARER",),
            listener_tokens={LISTENER: JwksTokenValidator(keys, rules)},
            listener_max_reauth_ms={LISTENER: MAX_REAUTH_MS},
        )
        yield start_module_gateway(
            tansu.bootstrap,
            security_protocol=LISTENER,
            listener={
                **provider.validating_listener(),
                "connections_max_reauth_ms": MAX_REAUTH_MS,
            },
            authenticator_factory=factory,
        )


def oauth_upstream(provider: IdentityProvider) -> UpstreamSecurity:
    return parse_upstream_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": provider.token_url,
            "sasl.oauthbearer.client.id": OAUTH_CLIENT,
            "sasl.oauthbearer.client.secret": OAUTH_SECRET,
        }
    )


def scram_upstream() -> UpstreamSecurity:
    return parse_upstream_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": GATEWAY_USER,
            "sasl.password": GATEWAY_PASSWORD,
        }
    )


def messages(caplog: pytest.LogCaptureFixture, logger: str = "quotagate") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith(logger)]


def produce_and_consume_for(
    config: dict[str, Any], topic: str, seconds: float, caplog: pytest.LogCaptureFixture
) -> tuple[list[bytes], list[str]]:
    """One producer and one consumer side by side, a message every 20 ms, then until the
    consumer has every message back (once, in order); what was sent, and the log lines of the
    ``seconds`` measured. Those start once the clients settled (the first message back, and
    a second more, in which librdkafka drops its bootstrap connections) and end before the
    clients close."""
    producer = Producer({**config, "acks": "all", "linger.ms": 0})
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    sent: list[bytes] = []
    received: list[bytes] = []

    def take(timeout_s: float) -> None:
        for message in consumer.consume(100, timeout_s):
            assert message.error() is None, message.error()
            received.append(message.value())

    def send_for(seconds: float, until: Callable[[], bool] = lambda: False) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until():
            value = f"m-{len(sent):05d}".encode()
            producer.produce(topic, value=value)
            sent.append(value)
            producer.poll(0)
            take(0.02)

    send_for(30, until=lambda: bool(received))
    send_for(1.0)
    settled = len(caplog.records)
    send_for(seconds)
    assert producer.flush(30) == 0
    end = time.monotonic() + 30
    while len(received) < len(sent) and time.monotonic() < end:
        take(0.5)
    lines = [r.getMessage() for r in caplog.records[settled:] if r.name.startswith("quotagate")]
    consumer.close()
    assert received == sent  # every message once, in order
    return sent, lines


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "OAUTHBEARER"])
def test_a_client_keeps_its_connection_while_the_upstream_one_reauthenticates(
    request: pytest.FixtureRequest,
    start_gateway: Callable[..., BackgroundGateway],
    caplog: pytest.LogCaptureFixture,
    mechanism: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger="quotagate")
    if mechanism == "OAUTHBEARER":
        provider: IdentityProvider = request.getfixturevalue("provider")
        decider: BackgroundGateway = request.getfixturevalue("oauth_decider")
        security, principal, secret = oauth_upstream(provider), OAUTH_CLIENT, OAUTH_SECRET
    else:
        decider = request.getfixturevalue("decider")
        security, principal, secret = scram_upstream(), GATEWAY_USER, GATEWAY_PASSWORD
    gateway = start_gateway(str(decider.bootstrap), upstream_security=security)
    config = {"bootstrap.servers": str(gateway.bootstrap)}
    topic = new_topic(config, "reauth")
    caplog.clear()

    sent, lines = produce_and_consume_for(config, topic, RUN_S, caplog)

    assert len(sent) > 100
    # No connection closed on either gateway: the client never reconnected, and no upstream
    # connection was dropped for an expired session or a failed re-authentication.
    closed = [line for line in lines if "connection_closed" in line or "expired" in line]
    assert not closed, closed
    renewed = upstream_reauthentications(lines)
    assert renewed and max(renewed.values()) >= 3, renewed
    decided = [
        line
        for line in messages(caplog, "quotagate.gateway.auth.sasl")
        if f"re-authenticated as User:{principal} via {mechanism}" in line
    ]
    assert len(decided) >= sum(renewed.values()) >= 3
    assert secret not in caplog.text
    if mechanism == "OAUTHBEARER":
        provider.assert_not_logged(caplog.text)


def test_librdkafka_reauthenticates_with_the_terminating_gateway(
    decider: BackgroundGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """The terminate side with a real KIP-368 client: librdkafka (2.2.0 and later) renews its
    sessions itself, and keeps its connections."""
    caplog.set_level(logging.DEBUG, logger="quotagate")
    config = {
        "bootstrap.servers": str(decider.bootstrap),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": GATEWAY_USER,
        "sasl.password": GATEWAY_PASSWORD,
    }
    topic = new_topic(config, "reauth-direct")
    caplog.clear()

    _, lines = produce_and_consume_for(config, topic, RUN_S / 2, caplog)

    closed = [line for line in lines if "connection_closed" in line or "expired" in line]
    assert not closed, closed
    renewed = [line for line in lines if "re-authenticated as User:gateway via SCRAM" in line]
    assert len(renewed) >= 2, renewed


# ---- raw connections to the decider ----------------------------------------------------------

METADATA = metadata_v12.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def call(sock: socket.socket, body: Any, correlation_id: int) -> Any:
    """Send ``body``, return its decoded answer, None when the peer closed instead."""
    sock.sendall(codec.encode_request_frame(body, correlation_id, "raw"))
    try:
        frame = raw_socket.read_frame(sock)
    except ConnectionError:
        return None
    return codec.decode_response(frame, int(body.__api_key__), int(body.__version__))


def plain_login(sock: socket.socket, user: str, password: str) -> Any:
    answer = call(sock, handshake_v1.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert answer.error_code == ErrorCode.none
    token = f"\0{user}\0{password}".encode()
    return call(sock, authenticate_v2.SaslAuthenticateRequest(auth_bytes=token), 2)


def test_a_client_that_never_reauthenticates_is_closed_once_its_session_expired(
    decider: BackgroundGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    with raw_socket.connect(decider, timeout_s=15) as sock:
        answer = plain_login(sock, GATEWAY_USER, GATEWAY_PASSWORD)
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() * 1000 == MAX_REAUTH_MS
        assert call(sock, METADATA, 3) is not None  # within the session: answered
        deadline = time.monotonic() + 30
        correlation_id = 4
        while (answer := call(sock, METADATA, correlation_id)) is not None:
            assert time.monotonic() < deadline, "the expired session was never closed"
            correlation_id += 1
            time.sleep(0.1)
    assert correlation_id > 4  # some requests were answered before the expiry
    assert any(
        "connection_closed" in line and "SASL session expired" in line for line in messages(caplog)
    )


def test_a_reauthentication_as_another_principal_is_refused_and_closes(
    decider: BackgroundGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    with raw_socket.connect(decider, timeout_s=15) as sock:
        assert plain_login(sock, GATEWAY_USER, GATEWAY_PASSWORD).error_code == ErrorCode.none
        answer = plain_login(sock, OTHER_USER, OTHER_PASSWORD)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == (
            f"Cannot change principals during re-authentication from User.{GATEWAY_USER}: "
            f"User.{OTHER_USER}"
        )
        assert call(sock, METADATA, 3) is None  # closed
    # The decider's one structured refusal line says it was the re-authentication.
    refusals = [line for line in messages(caplog) if "event=authentication_failed" in line]
    assert any("re-authentication: Cannot change principals" in line for line in refusals)
    assert OTHER_PASSWORD not in caplog.text
