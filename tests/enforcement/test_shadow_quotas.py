"""Shadow quotas on a live gateway: watched on real traffic, enforced on nobody, then promoted.

A real confluent-kafka producer sends at a steady rate through a real gateway (paced by the
test, so that its throughput is a fact of the run, not of the machine's load). A shadow
``producer_byte_rate`` at half that rate, set through AlterClientQuotas (``shadow.<key>``, the
request ``quotas alter --shadow`` sends), must show a would-throttle share of about 50 % in the
metrics within two quota windows while the producer's throughput stays what it was before; a
Metadata loop under a shadow ``request_percentage`` is never throttled either; the usage
events' ``shadow_throttle_ms`` must be what the pipeline's replay of the same events predicts
with the shadow values as the candidate (one engine, one decision); ``quotas promote`` then
throttles the producer to its quota. The CLI's ``alter --shadow`` is tested in
test_shadow_set.py and tests/fleet/test_fleet_shadow.py.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.client import ClientQuotaAlteration, SyncAdminClient
from quotagate.pipeline.replay.core import replay_frame
from quotagate.protocol import api_keys
from support.greedy import usage_rows
from support.paced import VALUE, PacedProducer, wire_rate

pytestmark = pytest.mark.integration

CLIENT = "shadowed"
META = "shadow-meta"  # a Metadata loop on one connection, under a shadow request quota
META_PERCENT = 0.1  # 1 ms of charged time per second: the loop goes far past it
RECORDS_PER_S = 100  # ~400 kB/s of payload
QUOTA = RECORDS_PER_S * len(VALUE) // 2  # half of it (the wire adds ~2 %)
WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1, "super.users": ["User:ANONYMOUS"]}
WINDOW_SPAN_S = 2.0
BASELINE_S = 4.0
SHADOW_S = 6.0
PROMOTED_S = 7.0

runner = CliRunner()


def _metrics(gateway: Any) -> dict[str, dict[tuple[str, str], float]]:
    text = generate_latest(gateway.background.gateway.metrics.registry).decode()
    found: dict[str, dict[tuple[str, str], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("quotagate_shadow"):
                key = (sample.labels.get("user", ""), sample.labels.get("client_id", ""))
                found.setdefault(sample.name, {})[key] = sample.value
    return found


def _metadata_loop(client: Any, stop: threading.Event, throttles: list[int]) -> None:
    while not stop.is_set():
        response = client.request(
            api_keys.METADATA,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        throttles.append(int(response.throttle_time.total_seconds() * 1000))
        stop.wait(0.005)


def _cli(*args: str) -> str:
    result = runner.invoke(app, ["quotas", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_shadow_quota_is_watched_live_replays_alike_and_promotes(
    quota_upstream: Any, start_quota_gateway: Any, raw_client: Any, tmp_path: Path
) -> None:
    usage = tmp_path / "usage"
    gateway = start_quota_gateway(quota_upstream, quotas=WINDOWS, usage={"path": str(usage)})
    bootstrap = gateway.bootstrap
    topic = f"shadow-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    entity = ["-b", bootstrap, "--entity-type", "clients", "--entity-name", CLIENT]
    producer = PacedProducer(bootstrap, topic, CLIENT, RECORDS_PER_S)
    producer.start()
    meta = raw_client(*gateway.host_port, META)
    meta_stop = threading.Event()
    meta_throttles: list[int] = []
    meta_thread = threading.Thread(target=_metadata_loop, args=(meta, meta_stop, meta_throttles))
    meta_thread.start()
    try:
        started = time.time()
        time.sleep(BASELINE_S)
        baseline_end = time.time()
        # Both shadow quotas in one AlterClientQuotas request (the admin path `quotas alter
        # --shadow` takes, one entity at a time): every event the shadow decided was decided
        # with both, as the replay's candidate has them.
        with SyncAdminClient(bootstrap) as client:
            client.alter_client_quotas(
                [
                    ClientQuotaAlteration.of(
                        {"client-id": CLIENT}, {"shadow.producer_byte_rate": float(QUOTA)}
                    ),
                    ClientQuotaAlteration.of(
                        {"client-id": META}, {"shadow.request_percentage": META_PERCENT}
                    ),
                ]
            ).raise_on_error()
        shadow_from = time.time()
        described = _cli("describe", *entity)
        assert f"shadow.producer_byte_rate={QUOTA}" in described

        # Within two quota windows the metrics show the producer would be throttled half
        # the time (a share of 1 - quota / rate).
        ratio = 0.0
        deadline = shadow_from + 2 * WINDOW_SPAN_S + 1.5  # a snapshot is taken every second
        while time.time() < deadline:
            ratio = (
                _metrics(gateway)
                .get("quotagate_shadow_would_throttle_ratio", {})
                .get(("", CLIENT), 0.0)
            )
            if 0.42 <= ratio <= 0.58:
                break
            time.sleep(0.2)
        assert 0.42 <= ratio <= 0.58, ratio
        time.sleep(max(0.0, shadow_from + SHADOW_S - time.time()))
        metrics = _metrics(gateway)
        assert metrics["quotagate_shadow_would_throttle_seconds_total"][("", CLIENT)] > 1.0
        assert metrics["quotagate_shadow_would_throttle_requests_total"][("", CLIENT)] > 10
        assert metrics["quotagate_shadow_produce_quota"][("", CLIENT)] == QUOTA
        shadow_end = time.time()

        # The request quota's candidate is dropped, the produce one promoted.
        meta_dropped = time.time()
        meta_entity = ["-b", bootstrap, "--entity-type", "clients", "--entity-name", META]
        _cli("alter", *meta_entity, "--shadow", "--delete-config", "request_percentage")
        output = _cli("promote", *entity)
        assert f"producer_byte_rate -> {QUOTA}" in output
        promoted_from = time.time()
        assert "shadow." not in _cli("describe", *entity)
        time.sleep(PROMOTED_S)
    finally:
        producer.stop.set()
        meta_stop.set()
        producer.join(60)
        meta_thread.join(60)
        meta.close()
    gateway.stop()  # flushes the usage events
    rows = usage_rows(usage)
    produced = [r for r in rows if r["client_id"] == CLIENT and r["api_key"] == api_keys.PRODUCE]

    # Nothing the client saw changed while the quota was a shadow: the same throughput, no
    # throttle; but the events carry what would have been.
    shadowed = [r for r in produced if shadow_from + 1 <= r["ts_ms"] / 1000 < shadow_end]
    assert shadowed and all(r["throttle_ms"] == 0 for r in shadowed)
    assert sum(r["shadow_throttle_ms"] > 0 for r in shadowed) > len(shadowed) / 2
    baseline = wire_rate(rows, CLIENT, started + 1, baseline_end)
    during = wire_rate(rows, CLIENT, shadow_from + 1, shadow_end)
    assert 0.95 <= during / baseline <= 1.05, (during, baseline)
    assert all(
        r["shadow_throttle_ms"] is None for r in produced if r["ts_ms"] / 1000 < shadow_from - 1
    )

    # Promoted, the quota holds the producer to it (the last windows, once the burst the
    # windows let through has passed).
    throttled = [r for r in produced if r["ts_ms"] / 1000 >= promoted_from]
    assert any(r["throttle_ms"] > 0 and r["throttle_cause"] == "produce" for r in throttled)
    late = wire_rate(rows, CLIENT, promoted_from + 4, promoted_from + PROMOTED_S)
    assert 0.8 * QUOTA <= late <= 1.2 * QUOTA, (late, QUOTA)
    assert producer.errors == []

    # The Metadata loop was never throttled, though its shadow request quota would have.
    assert meta_throttles and not any(meta_throttles)
    metadata = [r for r in rows if r["client_id"] == META and r["shadow_throttle_ms"] is not None]
    assert any(r["shadow_throttle_ms"] > 0 for r in metadata)

    # The replay of the events the shadow decided, with the shadow values as the candidate,
    # predicts every would-be throttle: one engine, one decision.
    decided = pd.DataFrame([r for r in rows if r["shadow_throttle_ms"] is not None])
    candidate = (
        f'[[quota]]\n"client-id" = "{CLIENT}"\nproducer_byte_rate = {QUOTA}\n'
        f'[[quota]]\n"client-id" = "{META}"\nrequest_percentage = {META_PERCENT}\n'
        '[gateway]\n"quota.window.num" = 2\n'
    )
    replayed = replay_frame(decided, candidate, closed_loop=False)
    # The Metadata loop's last events were decided after its candidate was dropped (the
    # events before them replay the same whether or not they are compared).
    compared = replayed[
        (replayed["client_id"] != META) | (replayed["ts_ms"] < (meta_dropped - 0.5) * 1000)
    ]
    agree = (compared["predicted_throttle_ms"] == compared["shadow_throttle_ms"]).mean()
    assert len(compared) > 100 and agree >= 0.999, (agree, len(compared))
