"""Gateway instances in front of one cluster hold one client to one quota.

One client id offers twice its quota over eight connections. Through one instance, Kafka's own
arithmetic holds it to the quota (the baseline). Spread over four instances sharing usage, with
most connections on one instance, the four together hold it there too; with the exchange off,
each instance enforces the whole quota on its own and the client gets twice as much: the same
test, able to fail. Instances placed evenly are held in front of Kafka below (two instances)
and as worker processes in tests/fleet/test_workers.py (four).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from quotagate.gateway.embedded import TansuBroker
from support.fleet_load import FleetRun
from support.upstreams import Upstream

pytestmark = pytest.mark.integration


def test_instances_hold_one_client_to_one_quota(tmp_path: Path) -> None:
    runs = {
        "single": FleetRun(instances=1, connections=8),
        "uneven": FleetRun(instances=4, placement=(0, 0, 0, 0, 0, 1, 2, 3)),
        "no exchange": FleetRun(instances=2, connections=8, exchange=False),
    }
    results: dict[str, float] = {}
    with TansuBroker() as broker:

        def run(name: str) -> None:
            results[name] = runs[name].achieved(broker.bootstrap, tmp_path / name.replace(" ", "-"))

        # In-process instances share one interpreter with their clients. Four exchanging
        # instances run alone: beside another run on a loaded CI machine their reports came
        # back late (exchange lost, peers silenced) and 5.7 % more got through than through
        # one instance. The two light runs share a phase.
        for phase in (("single", "no exchange"), ("uneven",)):
            threads = [threading.Thread(target=run, args=(name,)) for name in phase]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(240)
    # The ceiling (1.07) is the promise. Beside one process, ±6 %: in-process instances share
    # one interpreter with their clients, which adds noise that separate processes do not
    # have (tests/fleet/test_workers.py holds ±3 % of one process with real workers); a
    # fresh-clone run measured even 1.062 against single 1.009 (0.053 apart), others 1.0507.
    assert 0.95 <= results["uneven"] <= 1.07, results
    assert abs(results["uneven"] - results["single"]) <= 0.06, results
    assert results["no exchange"] >= 1.8, results


def test_instances_in_front_of_kafka_hold_one_quota(
    upstream_kafka: Upstream, tmp_path: Path
) -> None:
    """The same, its usage on Apache Kafka in one topic trimmed with DeleteRecords
    (``usage.trim = "delete-records"``; rolled by period, as on tansu, is the default): two
    exchanging instances hold the client to its quota, two that do not let it through twice."""
    runs = {
        "even": FleetRun(instances=2, connections=4, usage_trim="delete-records"),
        "no exchange": FleetRun(instances=2, connections=4, exchange=False),
    }
    results: dict[str, float] = {}

    def run(name: str) -> None:
        results[name] = runs[name].achieved(upstream_kafka, tmp_path / name.replace(" ", "-"))

    # Side by side, as the light runs in front of tansu: two instances each.
    threads = [threading.Thread(target=run, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert 0.95 <= results["even"] <= 1.07, results
    assert results["no exchange"] >= 1.8, results
