"""KIP-219 bookkeeping of the admin client (spec §6.3, §6.4, §9.8 ``testThrottled``)."""

from __future__ import annotations

import pytest

from quotagate.client.throttle import InFlight, NodeThrottle, must_self_throttle
from quotagate.protocol import api_keys


def test_node_throttle_counts_down() -> None:
    throttle = NodeThrottle()
    assert throttle.remaining_ms(0) == 0
    throttle.throttle(1_000, 100)
    assert throttle.remaining_ms(1_000) == 100
    assert throttle.remaining_ms(1_050) == 50
    assert throttle.remaining_ms(1_100) == 0
    assert throttle.remaining_ms(5_000) == 0


def test_node_throttle_never_regresses() -> None:
    throttle = NodeThrottle()
    throttle.throttle(0, 5_000)
    throttle.throttle(1_000, 100)  # a shorter, later throttle does not cut the first short
    assert throttle.remaining_ms(1_000) == 4_000
    throttle.throttle(2_000, 4_000)
    assert throttle.remaining_ms(2_000) == 4_000


@pytest.mark.parametrize(
    ("api_key", "version", "expected"),
    [
        (api_keys.CREATE_TOPICS, 2, False),
        (api_keys.CREATE_TOPICS, 3, True),
        (api_keys.CREATE_TOPICS, 7, True),
        (api_keys.DELETE_TOPICS, 1, False),
        (api_keys.DELETE_TOPICS, 2, True),
        (api_keys.CREATE_PARTITIONS, 0, False),
        (api_keys.CREATE_PARTITIONS, 1, True),
        (api_keys.METADATA, 5, False),
        (api_keys.METADATA, 6, True),
        (api_keys.API_VERSIONS, 1, False),
        (api_keys.API_VERSIONS, 2, True),
        (api_keys.DESCRIBE_CLIENT_QUOTAS, 1, False),  # never: the broker still mutes
        (api_keys.ALTER_CLIENT_QUOTAS, 1, False),
    ],
)
def test_self_throttle_versions(api_key: int, version: int, expected: bool) -> None:
    assert must_self_throttle(api_key, version, 1_000) is expected
    assert must_self_throttle(api_key, version, 0) is False


def test_request_timeout_excludes_throttled_time() -> None:
    request = InFlight(api_keys.CREATE_TOPICS, 7, sent_ms=0)
    assert request.expires_at_ms(30_000) == 30_000
    assert not request.expired(30_000, 30_000)
    assert request.expired(30_001, 30_000)
    request.add_throttle(10_000)
    assert request.expires_at_ms(30_000) == 40_000
    assert not request.expired(40_000, 30_000)
    assert request.expired(40_001, 30_000)
