"""Fixtures of the fuzz suite: its budget, the decoding child process and a served gateway."""

from __future__ import annotations

import resource
from collections.abc import Callable, Iterator
from typing import Final

import pytest

from fuzz.budget import Budget, from_environment
from fuzz.cases import UpstreamGuard
from fuzz.served import ServedGateway
from fuzz.worker import DecodeWorker
from quotagate.gateway.embedded import TansuBroker


@pytest.fixture(scope="session")
def budget() -> Budget:
    return from_environment()


@pytest.fixture
def decode_worker() -> Iterator[DecodeWorker]:
    worker = DecodeWorker()
    yield worker
    worker.close()


# What the fuzz suite's broker may map. tansu has no request-size cap of its own (see
# fuzz.cases.MAX_UPSTREAM_PARTITIONS): should a hostile request the guard missed reach it,
# it dies against this limit, failing the test, instead of taking the host's memory.
TANSU_ADDRESS_SPACE: Final = 4 << 30


@pytest.fixture(scope="module")
def fuzz_tansu(start_tansu: Callable[[], TansuBroker]) -> TansuBroker:
    broker = start_tansu()
    process = broker._process  # the fixture's own child; TansuBroker exposes no pid
    assert process is not None
    resource.prlimit(process.pid, resource.RLIMIT_AS, (TANSU_ADDRESS_SPACE, TANSU_ADDRESS_SPACE))
    return broker


@pytest.fixture
def upstream_guard(decode_worker: DecodeWorker) -> UpstreamGuard:
    return UpstreamGuard(decode_worker)


@pytest.fixture(scope="module")
def served_gateway(
    fuzz_tansu: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedGateway]:
    """``quotagate serve`` with every quota stage decoding, in front of a private broker."""
    gateway = ServedGateway(tmp_path_factory.mktemp("served"), fuzz_tansu.bootstrap)
    gateway.start()
    yield gateway
    gateway.stop()
