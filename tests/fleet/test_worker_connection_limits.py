"""Connection quotas hold per worker (docs/gateway.md, Connection quotas): with two workers
on one port, one address can hold up to twice its max.connections.per.ip, never more."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotagate.gateway.embedded import TansuBroker
from support.instances import Instance
from support.loopback import api_versions, connect_from

pytestmark = pytest.mark.integration

ATTEMPTS = 16


@pytest.fixture(scope="module")
def upstream() -> Iterator[TansuBroker]:
    with TansuBroker() as broker:
        yield broker


def test_max_connections_per_ip_is_per_worker(upstream: TansuBroker, tmp_path: Path) -> None:
    instance = Instance(
        tmp_path,
        upstream.bootstrap,
        workers=2,
        exchange=False,
        quota=1e9,
        gateway='"max.connections.per.ip" = 1',
    )
    host, _, port = instance.bootstrap.rpartition(":")
    socks = []
    try:
        answered = 0
        for _ in range(ATTEMPTS):
            sock = connect_from("127.0.0.2", host, int(port))
            socks.append(sock)
            answered += api_versions(sock)
        text = instance.metrics()
    finally:
        for sock in socks:
            sock.close()
        instance.stop()
    # The kernel spreads the connections over both workers by port; each admits one.
    assert 1 <= answered <= 2
    refused = sum(
        float(value)
        for value in re.findall(
            r'quotagate_connections_refused_total\{ip="<default>",listener="PLAINTEXT"\} (\S+)',
            text,
        )
    )
    assert refused == ATTEMPTS - answered, text
