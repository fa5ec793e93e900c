"""A fleet over a TLS upstream: ``quotagate serve --workers 2`` with ``[store] backend =
"kafka"``, its store, usage exchange and client links all over TLS (haproxy in front of tansu),
holds one client id to its quota fleet-wide."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.fleet_load import offer, wire_rate
from support.instances import Instance
from support.tls_proxy import TlsUpstream

pytestmark = pytest.mark.integration

QUOTA = 500_000.0
WARM_UP_S = 5.0
MEASURE_S = 16.0  # whole spans of the 2 x 1 s windows
CONNECTIONS = 8
VALUE = b"t" * 4096


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsUpstream]:
    with TlsUpstream(tmp_path_factory.mktemp("fleet-tls")) as tls:
        yield tls


def test_two_workers_hold_a_quota_over_a_tls_upstream(
    upstream: TlsUpstream, tmp_path: Path
) -> None:
    instance = Instance(
        tmp_path,
        upstream.bootstrap,
        workers=2,
        exchange=True,
        quota=QUOTA,
        upstream_keys={"security.protocol": "SSL", "ssl.ca.location": str(upstream.ca.certificate)},
    )
    try:
        start = offer(
            [instance.bootstrap] * CONNECTIONS, 2 * QUOTA, WARM_UP_S + MEASURE_S + 1, VALUE
        )
    finally:
        instance.stop()
    achieved = wire_rate(instance.usage, start + WARM_UP_S, MEASURE_S) / QUOTA
    print(f"two workers over TLS: {achieved:.3f} x the quota")
    assert 0.93 <= achieved <= 1.07, achieved
    assert "TLS:" not in "".join(instance.lines)  # no TLS failure on the way
