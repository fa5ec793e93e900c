"""[quotas] and [usage]: Kafka's names, and mistakes named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quotagate.enforcement.settings import QuotaSettings, fleet_settings
from quotagate.fleet.settings import FleetSettings
from quotagate.gateway import ConfigError, GatewayConfig


def test_settings_parse_kafka_names_and_reject_mistakes() -> None:
    settings = QuotaSettings.parse(
        {"quota": {"window": {"num": 5}}, "super.users": ["User:admin"]},
        {"path": "usage", "roll.interval.seconds": 60},
    )
    assert settings.window_num == 5 and settings.super_users == frozenset({"User:admin"})
    assert settings.usage.path == Path("usage") and settings.usage.roll_interval_s == 60
    with pytest.raises(ConfigError, match="unknown key"):
        QuotaSettings.parse({"quota.window.nmu": 3})
    with pytest.raises(ConfigError, match="reject"):
        QuotaSettings.parse({"topic.bytes.in.mode": "drop"})


def test_the_fleet_usage_trim_is_roll_or_delete_records() -> None:
    def fleet(**section: object) -> FleetSettings:
        return fleet_settings(GatewayConfig(extra={"fleet": section}))

    assert fleet().usage_trim == "roll"
    assert fleet(**{"usage.trim": "delete-records"}).usage_trim == "delete-records"
    with pytest.raises(ConfigError, match=re.escape("usage.trim = 'truncate' must be \"roll\"")):
        fleet(**{"usage.trim": "truncate"})
