"""Gateways with the quota stages in front of a real tansu broker or the Kafka cluster."""

from __future__ import annotations

import dataclasses
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotagate.enforcement import QuotaEnforcement
from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.gateway.auth import SaslAuthenticatorFactory
from quotagate.gateway.auth.setup import authenticator_factory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.upstream.channel import build_request
from quotagate.gateway.upstream.security import UpstreamSecurity
from quotagate.protocol import codec
from support.gateways import TANSU_NODE_ID, gateway_config
from support.upstreams import NAMES, Upstream


@dataclasses.dataclass
class QuotaGateway:
    background: BackgroundGateway
    runtime: QuotaRuntime
    authenticator: SaslAuthenticatorFactory | None = None

    @property
    def bootstrap(self) -> str:
        return str(self.background.bootstrap)

    @property
    def host_port(self) -> tuple[str, int]:
        address = self.background.bootstrap
        return address.host, address.port

    def stop(self) -> None:
        self.background.stop()
        # Its credential store may follow a topic of the upstream: closed, not leaked into
        # the next test's log once this test's broker is gone.
        if self.authenticator is not None:
            self.authenticator.close()
            self.authenticator = None


@pytest.fixture
def start_quota_gateway(
    tmp_path: Path,
) -> Iterator[Callable[..., QuotaGateway]]:
    """``start(upstream, quotas={...}, usage={...}, store=path)`` → a running gateway;
    ``security_protocol`` and ``listener`` (ListenerConfig fields) shape its one listener;
    ``sasl`` gives it the authenticator ``quotagate serve`` would build from that config;
    ``upstream_security`` is its ``[upstream]`` TLS/SASL; ``store_topic`` puts its store in
    that config topic of the upstream (``[store] backend = "kafka"``, as a fleet's).

    ``quotas`` and ``usage`` are the config sections of docs/quotas.md; the store defaults to
    a file in the test's temporary directory (pass the same path to "restart" a gateway).
    """
    started: list[QuotaGateway] = []

    def start(
        upstream: str | Upstream,
        *,
        quotas: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
        store: Path | None = None,
        security_protocol: str = "PLAINTEXT",
        listener: dict[str, Any] | None = None,
        sasl: bool = False,
        upstream_security: UpstreamSecurity | None = None,
        store_topic: str | None = None,
    ) -> QuotaGateway:
        extra: dict[str, Any] = {"quotas": quotas or {}}
        if usage is not None:
            extra["usage"] = usage
        config = gateway_config(
            upstream,
            security_protocol=security_protocol,
            listener=listener,
            store_path=str(store or tmp_path / "quotagate.db"),
            extra=extra,
            **({} if upstream_security is None else {"upstream_security": upstream_security}),
            **(
                {}
                if store_topic is None
                else {"store_backend": "kafka", "store_topic": store_topic}
            ),
        )
        runtime = QuotaRuntime.from_config(config)
        # A SASL listener authenticates as `quotagate serve` sets it up, from the config.
        factory = authenticator_factory(config) if sasl else None
        background = BackgroundGateway(
            config, authenticator_factory=factory, plugins=[QuotaEnforcement(runtime)]
        )
        background.start()
        background.gateway.metrics.registry.register(QuotaCollector(runtime))
        gateway = QuotaGateway(background, runtime, factory)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop()


@pytest.fixture(scope="module")
def quota_tansu() -> Iterator[TansuBroker]:
    """A broker of this test module's own, so quota tests never share topics by accident."""
    with TansuBroker() as broker:
        yield broker


@pytest.fixture(scope="module", params=NAMES)
def quota_upstream(request: pytest.FixtureRequest) -> Upstream:
    """Each upstream in turn: a tansu broker of the module's own, then the Kafka cluster
    (shared by the session: tests there name their topics uniquely)."""
    if request.param == "kafka":
        return request.getfixturevalue("upstream_kafka")
    broker: TansuBroker = request.getfixturevalue("quota_tansu")
    return Upstream("tansu", broker.bootstrap, (TANSU_NODE_ID,))


class RawClient:
    def __init__(self, host: str, port: int, client_id: str = "raw-client") -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.client_id = client_id
        self._correlation = 0

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        return self.send(build_request(api_key, version, **fields))

    def send(self, body: Any) -> Any:
        """Send a kio request entity and return the decoded response."""
        self._correlation += 1
        frame = codec.encode_request_frame(body, self._correlation, self.client_id)
        self.sock.sendall(frame)
        response = self.read_frame()
        return codec.decode_response(response, int(body.__api_key__), int(body.__version__))

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return struct.pack(">i", size) + self._read(size)

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("gateway closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def throttle_ms(response: Any) -> int:
    return int(response.throttle_time.total_seconds() * 1000)


def monotonic_ms() -> float:
    return time.monotonic() * 1000


@pytest.fixture(scope="session")
def raw_client() -> type[RawClient]:
    """The :class:`RawClient` class (test modules cannot import from conftest)."""
    return RawClient
