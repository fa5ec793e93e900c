"""/livez and /readyz on the metrics port (issue 35): what Kubernetes' probes read."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from quotagate.gateway.embedded import TansuBroker
from quotagate.gateway.health import HealthServer, Readiness, health_app, workers_ready
from quotagate.protocol.host_port import HostPort
from support.gateways import gateway_config, quota_gateway

pytestmark = pytest.mark.integration


def _get(address: HostPort, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_readyz_follows_the_upstream(tmp_path: Path, wait_for: Callable[..., Any]) -> None:
    """Not ready, with the reason, while the upstream is down; ready again once it is back.
    The gateway runs the quota plug-in, so its store check is part of the answer."""
    broker = TansuBroker(log_file=tmp_path / "tansu.log")
    broker.start()
    port = broker.port
    config = gateway_config(broker.bootstrap, metrics_listen=HostPort("127.0.0.1", 0))
    try:
        with quota_gateway(config, []) as gateway:
            address = gateway.background.gateway.metrics_address
            assert address is not None
            assert _get(address, "/livez") == (200, "ok\n")
            wait_for(lambda: _get(address, "/readyz")[0] == 200, 30, "ready in front of tansu")
            assert _get(address, "/readyz")[1] == "ready\n"
            # /metrics is still served beside the probes.
            status, text = _get(address, "/metrics")
            assert status == 200 and "quotagate_connections" in text

            broker.stop()
            status, body = _get(address, "/readyz")
            assert status == 503
            assert body.startswith("not ready\n")
            assert "upstream: no upstream bootstrap server accepts connections" in body
            assert f"127.0.0.1:{port}" in body
            assert _get(address, "/livez")[0] == 200, "a down upstream is no reason to restart"

            broker = TansuBroker(port=port, log_file=tmp_path / "tansu-again.log")
            broker.start()
            wait_for(lambda: _get(address, "/readyz")[0] == 200, 30, "ready once tansu is back")

            # A stop flips /readyz before anything drains; the endpoint is served till the end.
            gateway.background.gateway.readiness.drain()
            status, body = _get(address, "/readyz")
            assert status == 503 and "draining" in body
    finally:
        broker.stop()


def test_an_instance_is_ready_when_every_worker_is() -> None:
    """The supervisor's /readyz asks each worker's own /readyz and names who is not ready."""
    registry = CollectorRegistry()
    ready, waiting = Readiness(), Readiness()
    waiting.add("upstream", lambda: "no upstream bootstrap server accepts connections")
    servers = [
        HealthServer(HostPort("127.0.0.1", 0), health_app(registry, r)) for r in (ready, waiting)
    ]
    try:
        urls = {i: f"http://{s.address}/metrics" for i, s in enumerate(servers)}
        check = workers_ready(lambda: urls)
        assert check() == "worker 1: upstream: no upstream bootstrap server accepts connections"
        assert workers_ready(lambda: {0: urls[0]})() is None
        assert workers_ready(dict)() == "no worker running"
        servers[1].stop()
        assert (check() or "").startswith("worker 1: no answer")
    finally:
        servers[0].stop()
