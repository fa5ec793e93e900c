"""A shadow quota on a fleet of two workers (``quotagate serve --workers 2``, store and usage
exchange on the upstream): watched on live traffic through the instance's one ``/metrics``,
enforced on nobody, then promoted; as tests/enforcement/test_shadow_quotas.py on one gateway."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.gateway.embedded import TansuBroker
from support.greedy import usage_rows
from support.instances import Instance
from support.paced import VALUE, PacedProducer, wire_rate

pytestmark = pytest.mark.integration

CLIENT = "fleet-shadowed"
RECORDS_PER_S = 100
QUOTA = RECORDS_PER_S * len(VALUE) // 2
WINDOW_SPAN_S = 2.0  # Instance's 2 x 1 s windows
runner = CliRunner()


def _ratio(instance: Instance) -> float:
    """The largest would-throttle share any worker reports for the client (a gauge is per
    worker; each sees the fleet's usage of the key)."""
    shares = [
        sample.value
        for family in text_string_to_metric_families(instance.metrics())
        for sample in family.samples
        if sample.name == "quotagate_shadow_would_throttle_ratio"
        and sample.labels.get("client_id") == CLIENT
    ]
    return max(shares, default=0.0)


def test_a_fleet_watches_a_shadow_quota_and_promotes_it(tansu: TansuBroker, tmp_path: Path) -> None:
    instance = Instance(tmp_path / "fleet", tansu.bootstrap, 2, True, 1e9)
    try:
        topic = f"fleet-shadow-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": instance.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(30)
        entity = ["-b", instance.bootstrap, "--entity-type", "clients", "--entity-name", CLIENT]
        producer = PacedProducer(instance.bootstrap, topic, CLIENT, RECORDS_PER_S)
        producer.start()
        try:
            started = time.time()
            time.sleep(5.0)
            baseline_end = time.time()
            shadow = runner.invoke(
                app,
                ["quotas", "alter", *entity, "--shadow", "--add-config",
                 f"producer_byte_rate={QUOTA}"],
            )  # fmt: skip
            assert shadow.exit_code == 0, shadow.output
            shadow_from = time.time()
            ratio = 0.0
            # Two quota windows, a metrics snapshot and the store topic's propagation.
            deadline = shadow_from + 2 * WINDOW_SPAN_S + 3.0
            while time.time() < deadline:
                ratio = _ratio(instance)
                if 0.42 <= ratio <= 0.58:
                    break
                time.sleep(0.25)
            assert 0.42 <= ratio <= 0.58, ratio
            time.sleep(max(0.0, shadow_from + 7.0 - time.time()))
            shadow_end = time.time()
            promoted = runner.invoke(app, ["quotas", "promote", *entity])
            assert promoted.exit_code == 0, promoted.output
            promoted_from = time.time()
            time.sleep(9.0)
        finally:
            producer.stop.set()
            producer.join(60)
    finally:
        instance.stop()
    rows = usage_rows(instance.usage)
    baseline = wire_rate(rows, CLIENT, started + 1, baseline_end)
    during = wire_rate(rows, CLIENT, shadow_from + 1, shadow_end)
    assert 0.95 <= during / baseline <= 1.05, (during, baseline)
    shadowed = [
        r
        for r in rows
        if r["client_id"] == CLIENT and shadow_from + 1 <= r["ts_ms"] / 1000 < shadow_end
    ]
    assert shadowed and all(r["throttle_ms"] == 0 for r in shadowed)
    # Promoted: the sensors still hold the unthrottled rate, so a long mute comes first and a
    # burst after it (Kafka's windows); from the fifth second on the producer is at its quota.
    late = wire_rate(rows, CLIENT, promoted_from + 5, promoted_from + 9)
    assert 0.8 * QUOTA <= late <= 1.2 * QUOTA, (late, QUOTA)
    assert producer.errors == []
