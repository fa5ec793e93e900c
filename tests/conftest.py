"""Shared fixtures: real tansu brokers, a real Apache Kafka cluster and real gateways on free
loopback ports.

* ``start_tansu()`` starts a fresh broker (memory storage) and returns it; ``tansu`` is one
  broker shared by the whole session.
* ``kafka`` is a three-node Apache Kafka cluster (KRaft; PLAINTEXT, SSL and SASL_SSL
  listeners; support/kafka_cluster.py), started once. When a collected test needs it, it
  starts in the background as the session begins, and the engine's, protocol's, Kafka's
  ported and fuzz tests (``CORE``: no broker, and no timing) run first, while it boots.
  Tests that kill its nodes (``kills_brokers``) run after every other.
* ``upstream`` runs a test once in front of each: ``tansu`` and ``kafka`` (an ``Upstream``).
* ``start_gateway(upstream, ...)`` starts a gateway in a background thread in front of any
  bootstrap address and returns it, stopped when the test ends (``start_module_gateway``: when
  the module ends, for module-scoped fixtures); ``gateway`` is one shared gateway in front of
  ``tansu``.

Brokers and the shared gateway are stopped at the end of the session.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import pytest

from quotagate.gateway.auth.authenticator import AuthenticatorFactory
from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.stages.plugin import Plugin
from quotagate.gateway.stages.stage import Stage
from support.gateways import TANSU_NODE_ID, gateway_config
from support.kafka_cluster import ClusterStarter, KafkaCluster
from support.upstreams import NAMES, Upstream


@pytest.fixture(scope="session")
def start_tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], TansuBroker]]:
    brokers: list[TansuBroker] = []
    logs = tmp_path_factory.mktemp("tansu")

    def start() -> TansuBroker:
        broker = TansuBroker(log_file=logs / f"tansu-{len(brokers)}.log")
        broker.start()
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.stop()


@pytest.fixture(scope="session")
def tansu(start_tansu: Callable[[], TansuBroker]) -> TansuBroker:
    return start_tansu()


CORE: Final = frozenset({"quota", "protocol", "kafka", "fuzz", "test_compiled.py"})
"""What runs first, beside the cluster booting: directories (and a file) under ``tests/``."""
_STARTER: Final = pytest.StashKey[ClusterStarter]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent

    def in_core(item: pytest.Item) -> bool:
        return item.path.relative_to(tests).parts[0] in CORE

    def turn(item: pytest.Item) -> int:
        if in_core(item):
            return 0
        return 2 if item.get_closest_marker("kills_brokers") else 1

    items.sort(key=turn)  # stable: each part keeps its order
    if not config.option.collectonly and any(_needs_kafka(item) for item in items):
        _start_cluster(config)


def _start_cluster(config: pytest.Config) -> ClusterStarter:
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    starter = config.stash[_STARTER] = ClusterStarter(factory.mktemp("kafka")).start()
    return starter


def _needs_kafka(item: pytest.Item) -> bool:
    if "kafka" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("upstream") == "kafka"


@pytest.fixture(scope="session")
def kafka(pytestconfig: pytest.Config) -> Iterator[KafkaCluster]:
    starter = pytestconfig.stash.get(_STARTER, None)
    if starter is None:  # asked for by a test collection did not see (getfixturevalue)
        starter = _start_cluster(pytestconfig)
    try:
        yield starter.cluster()
    finally:
        starter.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A cluster started for tests that were then skipped or deselected is stopped too."""
    starter = session.config.stash.get(_STARTER, None)
    if starter is not None:
        starter.stop()


@pytest.fixture(scope="session")
def upstream_kafka(kafka: KafkaCluster) -> Upstream:
    return Upstream("kafka", kafka.bootstrap(), tuple(kafka.nodes))


@pytest.fixture(scope="module", params=NAMES)
def upstream(request: pytest.FixtureRequest) -> Upstream:
    """Each upstream in turn, for a module's tests (all of them in front of tansu, then all
    in front of Kafka, so each is started once)."""
    if request.param == "kafka":
        return request.getfixturevalue("upstream_kafka")
    broker: TansuBroker = request.getfixturevalue("tansu")
    return Upstream("tansu", broker.bootstrap, (TANSU_NODE_ID,))


@contextlib.contextmanager
def _gateways() -> Iterator[Callable[..., BackgroundGateway]]:
    """A factory of gateways in front of any upstream, all stopped when the block ends."""
    gateways: list[BackgroundGateway] = []

    def start(
        upstream: str | Upstream,
        *,
        stages: Sequence[Stage] = (),
        plugins: Sequence[Plugin] = (),
        authenticator_factory: AuthenticatorFactory | None = None,
        **config: Any,
    ) -> BackgroundGateway:
        config_ = gateway_config(upstream, **config)
        gateway = BackgroundGateway(config_, stages, authenticator_factory, plugins=plugins)
        gateway.start()
        gateways.append(gateway)
        return gateway

    try:
        yield start
    finally:
        for gateway in gateways:
            gateway.stop()


# A gateway outlives nothing that started it: one left running for the rest of the session
# (in front of a private broker already stopped, it retries discovery every second) takes
# CPU from the timing-sensitive fleet tests that come later.
@pytest.fixture
def start_gateway() -> Iterator[Callable[..., BackgroundGateway]]:
    """Gateways for one test, stopped when it ends."""
    with _gateways() as start:
        yield start


@pytest.fixture(scope="module")
def start_module_gateway() -> Iterator[Callable[..., BackgroundGateway]]:
    """Gateways for a module-scoped fixture, stopped when the module's tests are done."""
    with _gateways() as start:
        yield start


@pytest.fixture(scope="session")
def gateway(tansu: TansuBroker) -> Iterator[BackgroundGateway]:
    with _gateways() as start:
        yield start(tansu.bootstrap)


def _wait_for(
    condition: Callable[[], Any],
    timeout_s: float = 30.0,
    what: str = "",
    explain: Callable[[], str] | None = None,
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            message = f"timed out after {timeout_s} s waiting for {what or condition}"
            raise AssertionError(f"{message}: {explain()}" if explain else message)
        time.sleep(0.05)


@pytest.fixture(scope="session")
def wait_for() -> Callable[..., Any]:
    """``wait_for(condition, timeout_s=30, what="", explain=None)``: poll until truthy, fail at
    the deadline (with ``explain()``, asked only then, in the message)."""
    return _wait_for


@pytest.fixture(scope="session")
def test_output() -> Path:
    """Where tests leave what a person looks at afterwards (a screenshot, a terminal screen):
    ``QUOTAGATE_TEST_OUTPUT`` or ``var/test-output`` of the checkout (git ignores ``var/``).
    pytest's own temporary directories are pruned after three runs, so not there."""
    path = Path(os.environ.get("QUOTAGATE_TEST_OUTPUT") or Path(__file__).parents[1] / "var")
    if "QUOTAGATE_TEST_OUTPUT" not in os.environ:
        path = path / "test-output"
    path.mkdir(parents=True, exist_ok=True)
    return path
