"""The admin client against the gateway's quota enforcement (issue 4) over real tansu:
KIP-546 describe/alter round trips, and KIP-599 retries honouring KIP-219 throttles.

The one timed assertion is the 100-topic run, which must take as long as the token bucket
allows; everything else is checked by counting and ordering events.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.client import (
    AdminClient,
    ClientEvents,
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    FilterComponent,
    KafkaError,
    NewTopic,
    ThrottlingQuotaExceededError,
)
from quotagate.client.clock import monotonic_ms
from quotagate.protocol import api_keys

from .conftest import QuotaGateway

pytestmark = pytest.mark.integration

TANSU_NODE_ID = 111
MUTATION_RATE = "controller_mutation_rate"


class Timeline(ClientEvents):
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, float]] = []
        self.throttles: list[tuple[int, float, int]] = []

    def request_sent(self, node_id: int, api_key: int, api_version: int, now_ms: float) -> None:
        self.sent.append((node_id, api_key, now_ms))

    def throttled(self, node_id: int, now_ms: float, throttle_ms: int) -> None:
        self.throttles.append((node_id, now_ms, throttle_ms))

    def creates(self) -> list[float]:
        return [at for _node, key, at in self.sent if key == api_keys.CREATE_TOPICS]


def _names(count: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"kip599-{run}-{i:03d}" for i in range(count)]


async def _set_mutation_rate(bootstrap: str, rate: float) -> None:
    """Every ANONYMOUS client shares the default user's bucket."""
    async with AdminClient(bootstrap) as admin:
        result = await admin.alter_client_quotas(
            [ClientQuotaAlteration.of({"user": None}, {MUTATION_RATE: rate})]
        )
    result.raise_on_error()


# -- KIP-546 through the gateway -------------------------------------------------------------


async def test_alter_and_describe_client_quotas_round_trip(
    quota_gateway: Callable[..., QuotaGateway],
) -> None:
    gateway: QuotaGateway = quota_gateway()
    alice = ClientQuotaEntity.of({"user": "alice"})
    alice_app = ClientQuotaEntity.of({"user": "alice", "client-id": "app"})
    default_client = ClientQuotaEntity.of({"client-id": None})
    async with AdminClient(gateway.bootstrap) as admin:
        assert await admin.describe_client_quotas() == {}

        checked = await admin.alter_client_quotas(
            [ClientQuotaAlteration.of({"user": "alice"}, {MUTATION_RATE: 5.0})],
            validate_only=True,
        )
        assert dict(checked) == {alice: None}
        assert await admin.describe_client_quotas() == {}

        applied = await admin.alter_client_quotas(
            [
                ClientQuotaAlteration.of(
                    {"user": "alice"}, {MUTATION_RATE: 5.0, "producer_byte_rate": 1024.0}
                ),
                ClientQuotaAlteration.of(
                    {"user": "alice", "client-id": "app"}, {MUTATION_RATE: 2.5}
                ),
                ClientQuotaAlteration.of({"client-id": None}, {"request_percentage": 50.0}),
            ]
        )
        assert applied.errors == {}
        assert await admin.describe_client_quotas() == {
            alice: {MUTATION_RATE: 5.0, "producer_byte_rate": 1024.0},
            alice_app: {MUTATION_RATE: 2.5},
            default_client: {"request_percentage": 50.0},
        }
        only_alice = ClientQuotaFilter.contains_only([FilterComponent.of_entity("user", "alice")])
        assert await admin.describe_client_quotas(only_alice) == {
            alice: {MUTATION_RATE: 5.0, "producer_byte_rate": 1024.0}
        }
        defaults = ClientQuotaFilter.contains([FilterComponent.of_default_entity("client-id")])
        assert list(await admin.describe_client_quotas(defaults)) == [default_client]

        removed = await admin.alter_client_quotas(
            [ClientQuotaAlteration.of({"user": "alice"}, {"producer_byte_rate": None})]
        )
        assert removed.errors == {}
        assert (await admin.describe_client_quotas(only_alice))[alice] == {MUTATION_RATE: 5.0}

        invalid = await admin.alter_client_quotas(
            [
                ClientQuotaAlteration.of({"user": "bob"}, {"foobar": 1.0}),
                ClientQuotaAlteration.of({"user": "carol"}, {"consumer_byte_rate": 2.245}),
            ]
        )
        bob, carol = ClientQuotaEntity.of({"user": "bob"}), ClientQuotaEntity.of({"user": "carol"})
        assert invalid.errors[bob].name == "INVALID_REQUEST"
        assert "Invalid configuration key foobar" in invalid.errors[bob].message
        assert "cannot be a fractional value" in invalid.errors[carol].message

        mixed = ClientQuotaFilter.contains(
            [FilterComponent.of_entity_type("ip"), FilterComponent.of_entity_type("user")]
        )
        with pytest.raises(KafkaError) as caught:
            await admin.describe_client_quotas(mixed)
        assert caught.value.name == "INVALID_REQUEST"
        assert "Invalid entity filter component combination" in caught.value.message


async def test_only_super_users_may_alter(quota_gateway: Callable[..., QuotaGateway]) -> None:
    gateway: QuotaGateway = quota_gateway(super_users=frozenset({"User:admin"}))
    async with AdminClient(gateway.bootstrap) as admin:
        result = await admin.alter_client_quotas(
            [ClientQuotaAlteration.of({"user": "alice"}, {MUTATION_RATE: 5.0})]
        )
        assert await admin.describe_client_quotas() == {}
    (error,) = result.errors.values()
    assert (error.code, error.name) == (31, "CLUSTER_AUTHORIZATION_FAILED")


# -- KIP-599 with KIP-219 --------------------------------------------------------------------


async def test_retry_on_quota_violation_paces_creation_at_the_quota(
    quota_gateway: Callable[..., QuotaGateway],
) -> None:
    """100 topics × 4 partitions at R = 20 partitions/s with the default 11 one-second windows
    (burst B = 220): the bucket starts full, admits topics while it is not negative, then
    one topic each time it refills to zero. The last topic can pass only once
    B − 99·4 + R·t ≥ 0, i.e. at t = (396 − 220) / 20 = 8.8 s after the first request.
    Tolerance: not before 8.8 s − 50 ms (clock granularity), at most 3 s late (about 45
    throttled round trips on 2 shared cores)."""
    gateway: QuotaGateway = quota_gateway()
    rate, topics, partitions = 20.0, 100, 4
    earliest_s = (partitions * (topics - 1) - 11 * rate) / rate
    await _set_mutation_rate(gateway.bootstrap, rate)
    names = _names(topics)
    timeline = Timeline()
    async with AdminClient(gateway.bootstrap, events=timeline) as admin:
        result = await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    assert result.errors == {}

    creates = timeline.creates()
    elapsed_s = (creates[-1] - creates[0]) / 1000
    assert earliest_s - 0.05 <= elapsed_s <= earliest_s + 3.0, elapsed_s
    # One full bucket up front, then (mostly) one topic per refill: ~45 requests in all.
    assert len(creates) >= topics - 11 * rate / partitions - 1

    # The client sent nothing to the throttled node before its throttle had passed.
    throttles = [(at, ms) for node, at, ms in timeline.throttles if node == TANSU_NODE_ID]
    assert len(throttles) == len(creates) - 1
    sent = [at for node, _key, at in timeline.sent if node == TANSU_NODE_ID]
    for throttled_at, throttle_ms in throttles:
        assert not [at for at in sent if throttled_at <= at < throttled_at + throttle_ms]

    # What the gateway saw: it read each CreateTopics only after the throttle it had imposed
    # on the previous one (it mutes the connection too, so this is the gateway's view; the
    # check above is what proves the client held back on its own).
    seen = [s for s in gateway.recorder.seen if s.api_key == api_keys.CREATE_TOPICS]
    assert len(seen) == len(creates)
    for previous, current in itertools.pairwise(seen):
        assert previous.mute_ms > 0
        assert current.read_ms >= previous.answered_ms + previous.mute_ms - 1

    listed = ConfluentAdmin({"bootstrap.servers": gateway.bootstrap}).list_topics(timeout=30)
    assert {n: len(listed.topics[n].partitions) for n in names} == dict.fromkeys(names, 4)


async def test_retry_off_surfaces_the_first_rejection_at_once(
    quota_gateway: Callable[..., QuotaGateway],
) -> None:
    # R = 1/s, burst 11: topics 1-3 pass (tokens 11 → -1), 4 and 5 are refused with the
    # time to refill to zero, round(1 / 1 × 1000) = 1000 ms.
    gateway: QuotaGateway = quota_gateway()
    await _set_mutation_rate(gateway.bootstrap, 1.0)
    names = _names(5)
    timeline = Timeline()
    async with AdminClient(gateway.bootstrap, events=timeline) as admin:
        result = await admin.create_topics(
            [NewTopic(n, 4, 1) for n in names], retry_on_quota_violation=False
        )
    assert result.succeeded == names[:3]
    for name in names[3:]:
        error = result[name]
        assert isinstance(error, ThrottlingQuotaExceededError)
        assert error.throttle_time_ms == 1000
        assert error.message == "The throttling quota has been exceeded."
    assert len(timeline.creates()) == 1  # no retry was sent
    assert [ms for _node, _at, ms in timeline.throttles] == [1000]


async def test_a_short_timeout_reports_the_remaining_throttle(
    quota_gateway: Callable[..., QuotaGateway],
) -> None:
    # Same bucket as above; the retried topics wait for a 1000 ms throttle, but the call
    # has only 400 ms: they fail with the throttle left, not with a timeout.
    gateway: QuotaGateway = quota_gateway()
    await _set_mutation_rate(gateway.bootstrap, 1.0)
    names = _names(5)
    timeline = Timeline()
    async with AdminClient(gateway.bootstrap, events=timeline) as admin:
        await admin.describe_client_quotas()  # connect and learn metadata outside the call
        result = await admin.create_topics([NewTopic(n, 4, 1) for n in names], timeout_ms=400)
        after = monotonic_ms()
    assert result.succeeded == names[:3]
    assert len(timeline.creates()) == 1  # the retry never went out: the node was throttled
    ((_node, throttled_at, throttle_ms),) = timeline.throttles
    assert throttle_ms == 1000
    for name in names[3:]:
        error = result[name]
        assert isinstance(error, ThrottlingQuotaExceededError), error
        # remaining = max(0, 1000 − (timeout moment − retry call creation)); the retry call
        # was created after the throttled response and timed out before ``after``.
        assert 1000 - (after - throttled_at) - 1 <= error.throttle_time_ms <= 1000


def test_topics_cli_without_retry_reports_the_throttle(
    quota_gateway: Callable[..., QuotaGateway],
) -> None:
    gateway: QuotaGateway = quota_gateway()
    asyncio.run(_set_mutation_rate(gateway.bootstrap, 1.0))
    names = _names(5)
    result = CliRunner().invoke(
        app,
        ["topics", "create", *names, "--partitions", "4", "--bootstrap-server", gateway.bootstrap],
    )
    assert result.exit_code == 1
    for name in names[:3]:
        assert f"Created topic {name}." in result.stdout
    for name in names[3:]:
        assert (
            f"Error while creating topic {name}: THROTTLING_QUOTA_EXCEEDED (89): The throttling "
            "quota has been exceeded. (throttle time 1000 ms)"
        ) in result.stderr
