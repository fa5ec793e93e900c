"""[quotas] and [usage]: Kafka's names, and mistakes named."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotagate.enforcement.settings import QuotaSettings
from quotagate.gateway import ConfigError


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
