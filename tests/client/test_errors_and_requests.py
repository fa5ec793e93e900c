"""Error values, remaining throttle arithmetic (spec §5.6) and request building per version."""

from __future__ import annotations

import pytest

from quotagate.client import requests
from quotagate.client.config import AdminConfig, parse_bootstrap
from quotagate.client.errors import (
    KafkaError,
    ThrottlingQuotaExceededError,
    UnsupportedVersionError,
    error_for,
)
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity
from quotagate.client.versions import choose_version
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.api_support import VersionRange
from quotagate.protocol.headers import parse_request_header
from quotagate.quota.entity_filter import ClientQuotaFilter, FilterComponent


def test_error_names_codes_and_retriability() -> None:
    error = error_for(36, "Topic 'a' already exists.")
    assert (error.code, error.name) == (36, "TOPIC_ALREADY_EXISTS")
    assert str(error) == "TOPIC_ALREADY_EXISTS (36): Topic 'a' already exists."
    assert not error.retriable
    quota = error_for(89, None, throttle_time_ms=1234)
    assert isinstance(quota, ThrottlingQuotaExceededError)
    assert quota.throttle_time_ms == 1234
    assert quota.retriable
    assert "The throttling quota has been exceeded." in str(quota)
    assert "throttle_time_ms=1234" in str(quota)
    assert KafkaError(12345).name == "UNKNOWN_ERROR_CODE_12345"


def test_remaining_throttle_never_goes_below_zero() -> None:
    error = ThrottlingQuotaExceededError(5_000)
    assert error.remaining_after(1_200.7).throttle_time_ms == 3_799
    assert error.remaining_after(5_000).throttle_time_ms == 0
    assert error.remaining_after(9_000).throttle_time_ms == 0


def test_bootstrap_parsing() -> None:
    assert [str(a) for a in parse_bootstrap("127.0.0.1:9092, [::1]:9093")] == [
        "127.0.0.1:9092",
        "[::1]:9093",
    ]
    for bad in ("", "localhost", "127.0.0.1:x", ":9092"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)
    with pytest.raises(ValueError, match=r"retry\.backoff\.ms"):
        AdminConfig.of("127.0.0.1:9092", retry_backoff_ms=-1)


def test_version_negotiation_picks_the_highest_common_version() -> None:
    broker = {api_keys.CREATE_TOPICS: VersionRange(api_keys.CREATE_TOPICS, 0, 5)}
    assert choose_version(api_keys.CREATE_TOPICS, broker) == 5
    broker = {api_keys.CREATE_TOPICS: VersionRange(api_keys.CREATE_TOPICS, 0, 99)}
    assert choose_version(api_keys.CREATE_TOPICS, broker) == 7
    with pytest.raises(UnsupportedVersionError, match="does not support"):
        choose_version(api_keys.CREATE_PARTITIONS, broker)
    broker = {api_keys.CREATE_TOPICS: VersionRange(api_keys.CREATE_TOPICS, 0, 1)}
    with pytest.raises(UnsupportedVersionError, match="no common version"):
        choose_version(api_keys.CREATE_TOPICS, broker)


def _roundtrip(request: object) -> object:
    frame = codec.encode_request_frame(request, 7, "test")
    return codec.decode_request(frame, parse_request_header(frame))


@pytest.mark.parametrize("version", list(api_table.modelled_versions(api_keys.CREATE_TOPICS) or []))
def test_create_topics_request_every_version(version: int) -> None:
    topic = requests.NewTopic("t", 4, 1, {"retention.ms": "1000"})
    decoded = _roundtrip(requests.create_topics_request(version, [topic], 1500, True))
    (entry,) = decoded.topics  # type: ignore[attr-defined]
    assert (entry.name, entry.num_partitions, entry.replication_factor) == ("t", 4, 1)
    assert [(c.name, c.value) for c in entry.configs] == [("retention.ms", "1000")]
    assert decoded.timeout.total_seconds() == 1.5  # type: ignore[attr-defined]
    assert decoded.validate_only is True  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", list(api_table.modelled_versions(api_keys.DELETE_TOPICS) or []))
def test_delete_topics_request_every_version(version: int) -> None:
    decoded = _roundtrip(requests.delete_topics_request(version, ["a", "b"], 1000))
    names = (
        [t.name for t in decoded.topics]  # type: ignore[attr-defined]
        if version >= 6
        else list(decoded.topic_names)  # type: ignore[attr-defined]
    )
    assert names == ["a", "b"]


@pytest.mark.parametrize("version", list(api_table.modelled_versions(api_keys.METADATA) or []))
def test_metadata_request_every_version(version: int) -> None:
    decoded = _roundtrip(requests.metadata_request(version))
    assert tuple(decoded.topics) == ()  # type: ignore[attr-defined]


def test_client_quota_requests() -> None:
    quota_filter = ClientQuotaFilter.contains_only(
        [FilterComponent.of_entity("user", "alice"), FilterComponent.of_default_entity("client-id")]
    )
    for version in (0, 1):
        decoded = _roundtrip(requests.describe_client_quotas_request(version, quota_filter))
        assert decoded.strict is True  # type: ignore[attr-defined]
        assert [
            (c.entity_type, int(c.match_type), c.match)
            for c in decoded.components  # type: ignore[attr-defined]
        ] == [("user", 0, "alice"), ("client-id", 1, None)]
    alteration = ClientQuotaAlteration.of(
        {"user": "alice", "client-id": None},
        {"controller_mutation_rate": 10.0, "producer_byte_rate": None},
    )
    assert alteration.entity == ClientQuotaEntity((("client-id", None), ("user", "alice")))
    assert str(alteration.entity) == "client-id=<default>, user=alice"
    for version in (0, 1):
        decoded = _roundtrip(requests.alter_client_quotas_request(version, [alteration], False))
        (entry,) = decoded.entries  # type: ignore[attr-defined]
        assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
            ("client-id", None),
            ("user", "alice"),
        ]
        # A removal is Remove=true with a 0.0 value, as Java sends it.
        assert [(o.key, o.value, o.remove) for o in entry.ops] == [
            ("controller_mutation_rate", 10.0, False),
            ("producer_byte_rate", 0.0, True),
        ]
