"""Fixtures of the fuzz suite: its budget, the decoding child process and a served gateway."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fuzz.budget import Budget, from_environment
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


@pytest.fixture(scope="module")
def fuzz_tansu(start_tansu: Callable[[], TansuBroker]) -> TansuBroker:
    return start_tansu()


@pytest.fixture(scope="module")
def served_gateway(
    fuzz_tansu: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedGateway]:
    """``quotagate serve`` with every quota stage decoding, in front of a private broker."""
    gateway = ServedGateway(tmp_path_factory.mktemp("served"), fuzz_tansu.bootstrap)
    gateway.start()
    yield gateway
    gateway.stop()
