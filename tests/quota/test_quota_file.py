"""The quota file shared by `quotas apply` and `pipeline recommend`."""

from __future__ import annotations

import pytest

from quotagate.quota import QuotaFile, QuotaFileEntry, dump_quota_file, load_quota_file
from quotagate.quota.quota_file import QuotaFileError


def test_round_trip() -> None:
    original = QuotaFile(
        [
            QuotaFileEntry({"user": "alice", "client-id": None}, {"producer_byte_rate": 1048576}),
            QuotaFileEntry({"user": None}, {"controller_mutation_rate": 2.5}),
            QuotaFileEntry(
                {"client-id": "etl"}, {"consumer_byte_rate": 2e6, "request_percentage": 50.0}
            ),
        ],
        {"controller.quota.window.num": 20},
        tenant_mapping_rules="RULE:client-id:^team-([a-z]+)-.*$/$1/",
        exempt_principals=["User:canary", "User:cruise-control"],
    )
    assert load_quota_file(dump_quota_file(original)) == original


def test_broker_settings_are_optional_and_an_empty_list_exempts_nobody() -> None:
    assert load_quota_file("").exempt_principals is None
    assert load_quota_file("").tenant_mapping_rules is None
    given = load_quota_file('[broker]\n"quota.exempt.principals" = []\n')
    assert given.exempt_principals == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[quota]]\nuser = 'a'\nfoo = 1\n", "Invalid configuration key foo"),
        ("[[quota]]\nuser = 'a'\nproducer_byte_rate = 1.5\n", "fractional"),
        ("[[quota]]\nuser = 'a'\n", "no quota values"),
        ("[quota]\nuser = 'a'\n", "array of tables"),
        ("[[quota]]\nuser = 'a'\nproducer_byte_rate = 'x'\n", "neither an entity nor a number"),
        ("[[quota]]\nip = '1.1.1.1'\nuser = 'a'\nconnection_creation_rate = 1\n", "combination"),
        ("nonsense = 1\n", "unknown top-level"),
        ("[[quota\n", "not valid TOML"),
        ('[broker]\n"quota.window.num" = 3\n', r"\[broker\]: unknown setting"),
        ('[broker]\n"tenant.mapping.rules" = 1\n', "must be a string"),
        ('[broker]\n"quota.exempt.principals" = "User:a"\n', "must be a list"),
        # The store's rule for the live setting (quota.principal_list), word for word.
        ('[broker]\n"quota.exempt.principals" = ["canary"]\n', "'canary' is not a principal"),
        ('[broker]\n"quota.exempt.principals" = ["User:"]\n', "write TYPE:NAME"),
    ],
)
def test_errors_say_where_and_what(text: str, message: str) -> None:
    with pytest.raises(QuotaFileError, match=message):
        load_quota_file(text)
