"""The quota file's ``[broker]`` table and the principal list, fuzzed: every document is read
or refused with ``QuotaFileError``, nothing else, and what is read writes back the same.

The file comes from users and from ``pipeline recommend`` (which copies a rollup's
``[broker]`` through ``summary.json``), and ``quota.exempt.principals`` from the wire too
(IncrementalAlterConfigs, ``parse_principal_list``).
"""

from __future__ import annotations

from typing import Any

import tomli_w
from hypothesis import strategies as st

from fuzz.budget import Budget, run_examples
from quotagate.quota import dump_quota_file, load_quota_file
from quotagate.quota.principal_list import parse_principal_list
from quotagate.quota.quota_file import QuotaFile, QuotaFileError

_TEXT = st.text(st.sampled_from("User:abc-_,.:= \t\\\"'[]RULE$1/^"), max_size=20)
_SCALAR = st.one_of(_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans())
_VALUE = st.one_of(
    _SCALAR, st.lists(_SCALAR, max_size=4), st.dictionaries(_TEXT, _SCALAR, max_size=2)
)
_KEY = st.sampled_from(
    ["tenant.mapping.rules", "quota.exempt.principals", "quota.window.num", "", "x"]
)
_BROKER = st.one_of(st.dictionaries(_KEY, _VALUE, max_size=3), _SCALAR)


def _read(text: str) -> QuotaFile | None:
    try:
        return load_quota_file(text)
    except QuotaFileError as refused:
        assert str(refused)
        return None


def test_broker_tables_are_read_or_refused_and_read_back_the_same(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        document: dict[str, Any] = {"broker": data.draw(_BROKER)}
        try:
            text = tomli_w.dumps(document)
        except (TypeError, ValueError):
            return  # not a TOML document: nothing a user could write
        quota_file = _read(text)
        if quota_file is not None:
            assert load_quota_file(dump_quota_file(quota_file)) == quota_file

    run_examples(body, max(budget.round_trip_examples * 100, 200), budget, "quota_file_broker")


def test_principal_lists_are_read_or_refused(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        text = data.draw(_TEXT)
        try:
            principals = parse_principal_list(text)
        except ValueError as refused:
            assert "is not a principal" in str(refused)
            return
        assert parse_principal_list(",".join(principals)) == principals

    run_examples(body, max(budget.round_trip_examples * 100, 200), budget, "principal_list")
