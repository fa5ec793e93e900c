"""Two gateway instances in front of one cluster hold one client to one quota.

One client id offers twice its quota over four connections, two through each instance. With
the usage exchange on, the two together hold it to the quota, as one instance holds it when
all four connections go through it; with the exchange off, each instance enforces the whole
quota on its own and the client gets twice as much: the same test, able to fail.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from quotagate.gateway.embedded import TansuBroker
from support.fleet_load import FleetRun

pytestmark = pytest.mark.integration


def test_two_instances_hold_one_client_to_one_quota(tmp_path: Path) -> None:
    runs = {
        "single": FleetRun(instances=1),
        "fleet": FleetRun(instances=2),
        "no exchange": FleetRun(instances=2, exchange=False),
    }
    results: dict[str, float] = {}
    with TansuBroker() as broker:

        def run(name: str) -> None:
            results[name] = runs[name].achieved(broker.bootstrap, tmp_path / name.replace(" ", "-"))

        threads = [threading.Thread(target=run, args=(name,)) for name in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(240)
    assert 0.95 <= results["fleet"] <= 1.05, results
    assert abs(results["fleet"] - results["single"]) <= 0.03, results
    assert results["no exchange"] >= 1.8, results
