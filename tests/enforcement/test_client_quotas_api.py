"""DescribeClientQuotas / AlterClientQuotas answered by the gateway from its store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kip546_vectors import ENTITIES, FILTER_MATCHES
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.sync import SyncAdminClient
from quotagate.protocol.errors import ErrorCode
from quotagate.quota import ClientQuotaFilter, FilterComponent
from quotagate.store.quotas import QuotaStore

pytestmark = pytest.mark.integration

SUPER = {"super.users": ["User:ANONYMOUS"]}


def _throttles_of_one_produce(bootstrap: str, client_id: str) -> list[int]:
    """Produce one 50 kB record as ``client_id``; the throttle times librdkafka reported."""
    seen: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "throttle_cb": lambda event: seen.append(int(event.throttle_time * 1000)),
        }
    )
    errors: list[Any] = []
    producer.produce("quota-admin", b"x" * 50_000, on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors == [None]
    return seen


def test_alter_needs_super_user_acts_at_once_and_survives_restart(
    quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "store.db"
    entity = {"client-id": "slow"}
    alteration = ClientQuotaAlteration.of(entity, {"producer_byte_rate": 1000.0})

    plain = start_quota_gateway(quota_tansu.bootstrap, store=store)
    with SyncAdminClient(plain.bootstrap) as admin:
        result = admin.alter_client_quotas([alteration])
        error = result[ClientQuotaEntity.of(entity)]
        assert error is not None and error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert admin.describe_client_quotas() == {}
    # The gateway's log says who was refused and what would allow it.
    assert "event=alter_refused api=AlterClientQuotas principal=User:ANONYMOUS" in caplog.text
    assert 'reason="no super users"' in caplog.text and "super.users" in caplog.text
    plain.stop()

    gateway = start_quota_gateway(quota_tansu.bootstrap, store=store, quotas=SUPER)
    assert _throttles_of_one_produce(gateway.bootstrap, "slow") == []
    with SyncAdminClient(gateway.bootstrap) as admin:
        admin.alter_client_quotas([alteration]).raise_on_error()
    # 50 kB against 1000 B/s over a 10 s window: the very next request is throttled.
    throttles = _throttles_of_one_produce(gateway.bootstrap, "slow")
    assert throttles and throttles[0] > 1000
    gateway.stop()

    restarted = start_quota_gateway(quota_tansu.bootstrap, store=store, quotas=SUPER)
    with SyncAdminClient(restarted.bootstrap) as admin:
        assert admin.describe_client_quotas() == {
            ClientQuotaEntity.of(entity): {"producer_byte_rate": 1000.0}
        }
    assert _throttles_of_one_produce(restarted.bootstrap, "slow")
    restarted.stop()
    audit = QuotaStore.open(store).audit()
    assert [(a.principal, a.quota_key, a.old_value, a.new_value) for a in audit] == [
        ("User:ANONYMOUS", "producer_byte_rate", None, 1000.0)
    ]


def test_describe_matches_kip_546_vectors_and_alter_validates(
    quota_tansu: Any, start_quota_gateway: Any
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=SUPER)
    with SyncAdminClient(gateway.bootstrap) as admin:
        alterations = [
            ClientQuotaAlteration.of(
                entity,
                {"connection_creation_rate": 10.0}
                if "ip" in entity
                else {"request_percentage": 50.0},
            )
            for entity in ENTITIES
        ]
        admin.alter_client_quotas(alterations).raise_on_error()
        for quota_filter, expected in FILTER_MATCHES:
            assert len(admin.describe_client_quotas(quota_filter)) == expected, quota_filter
        with pytest.raises(Exception, match="Invalid entity filter component combination"):
            admin.describe_client_quotas(
                ClientQuotaFilter.contains(
                    [FilterComponent.of_entity_type("ip"), FilterComponent.of_entity_type("user")]
                )
            )
        bad = admin.alter_client_quotas(
            [
                ClientQuotaAlteration.of({"user": "x"}, {"foobar": 1.0}),
                ClientQuotaAlteration.of({"user": "y"}, {"consumer_byte_rate": 2.245}),
                ClientQuotaAlteration.of({"user": "z"}, {"producer_byte_rate": 0.0}),
                ClientQuotaAlteration.of({"user": "ok"}, {"request_percentage": 56.62367}),
            ]
        )
        messages = {str(entity): error.message if error else None for entity, error in bad.items()}
        assert messages == {
            "user=x": "Invalid configuration key foobar",
            "user=y": "consumer_byte_rate cannot be a fractional value.",
            "user=z": "Quota producer_byte_rate must be greater than 0",
            "user=ok": None,
        }
        assert all(e.code == ErrorCode.INVALID_REQUEST for e in bad.errors.values())
    # The applied request_percentage for "ok" is live in the request quota manager.
    assert gateway.runtime.managers.request.quota_limit("ok", "any") == 56.62367
