"""``quotagate quotas apply`` as quotas as code, against a running gateway: --plan, --prune,
--dry-run and --check, with the gateway's SQLite store and with a fleet's config topic."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from quotagate.cli import app
from quotagate.quota import QuotaFile, QuotaFileEntry, dump_quota_file

pytestmark = pytest.mark.integration
runner = CliRunner()
SUPER = {"super.users": ["User:ANONYMOUS"]}

LIVE = [
    ("users", "alice", "producer_byte_rate=1024"),
    ("clients", "batch", "consumer_byte_rate=2048"),
    ("users", "bob", "producer_byte_rate=500,request_percentage=10"),
]
FILE = QuotaFile(
    [
        QuotaFileEntry({"user": "alice"}, {"producer_byte_rate": 4096.0}),
        QuotaFileEntry({"client-id": "batch"}, {"consumer_byte_rate": 2048.0}),
        QuotaFileEntry({"user": "carol"}, {"producer_byte_rate": 100.0}),
    ]
)


def _invoke(*args: str) -> Result:
    return runner.invoke(app, ["quotas", *args])


def _alter(bootstrap: str, kind: str, name: str, config: str) -> None:
    result = _invoke(
        "alter", "-b", bootstrap, "--entity-type", kind, "--entity-name", name,
        "--add-config", config,
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def _live(bootstrap: str) -> list[str]:
    result = _invoke("describe", "-b", bootstrap)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@pytest.mark.parametrize("backend", ["sqlite", "kafka"])
def test_plan_prune_dry_run_and_check(
    backend: str, quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    topic = f"_quotagate.apply-{uuid.uuid4().hex[:8]}.config" if backend == "kafka" else None
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=SUPER, store_topic=topic)
    b = gateway.bootstrap
    for kind, name, config in LIVE:
        _alter(b, kind, name, config)
    before = _live(b)
    quota_file = tmp_path / "quotas.toml"
    quota_file.write_text(dump_quota_file(FILE))
    f = str(quota_file)

    drift = _invoke("apply", f, "-b", b, "--check")
    assert drift.exit_code == 2, drift.output
    assert drift.stdout.splitlines() == [
        "~ change user=alice: producer_byte_rate 1024 -> 4096",
        "+ add user=carol: producer_byte_rate (none) -> 100",
        "Plan: 1 to add, 1 to change, 0 to remove.",
    ]

    planned = _invoke("apply", f, "-b", b, "--plan", "--prune")
    assert planned.exit_code == 0, planned.output
    assert planned.stdout.splitlines() == [
        "~ change user=alice: producer_byte_rate 1024 -> 4096",
        "- remove user=bob: producer_byte_rate 500 -> (none), request_percentage 10 -> (none)",
        "+ add user=carol: producer_byte_rate (none) -> 100",
        "Plan: 1 to add, 1 to change, 1 to remove.",
    ]
    scoped = _invoke("apply", f, "-b", b, "--plan", "--prune", "--entity-type", "users",
                     "--entity-name", "bob")  # fmt: skip
    assert scoped.stdout.splitlines() == [
        "- remove user=bob: producer_byte_rate 500 -> (none), request_percentage 10 -> (none)",
        "Plan: 0 to add, 0 to change, 1 to remove.",
    ]
    as_json = json.loads(_invoke("apply", f, "-b", b, "--plan", "--prune", "-o", "json").stdout)
    assert [(p["action"], p["entity"][0]["entity_name"]) for p in as_json] == [
        ("change", "alice"), ("remove", "bob"), ("add", "carol"),
    ]  # fmt: skip
    assert _live(b) == before  # a plan changes nothing

    dry = _invoke("apply", f, "-b", b, "--dry-run", "--prune")
    assert dry.exit_code == 0, dry.output
    assert "Validated (nothing changed) for user=bob." in dry.stdout
    assert _live(b) == before  # the gateway honoured validate_only

    applied = _invoke("apply", f, "-b", b, "--prune")
    assert applied.exit_code == 0, applied.output
    assert _live(b) == [
        "Quota configs for client-id=batch are consumer_byte_rate=2048",
        "Quota configs for user=alice are producer_byte_rate=4096",
        "Quota configs for user=carol are producer_byte_rate=100",
    ]
    clean = _invoke("apply", f, "-b", b, "--check", "--prune")
    assert clean.exit_code == 0, clean.output
    assert clean.stdout.splitlines() == ["Plan: 0 to add, 0 to change, 0 to remove."]
    again = _invoke("apply", f, "-b", b, "--prune")
    assert again.stdout.splitlines() == ["No changes: the gateway's quotas are what the file says."]

    # Someone changes a quota by hand: --check catches the drift, through any gateway of
    # the fleet when the store is the shared topic.
    _alter(b, "users", "alice", "producer_byte_rate=1")
    checker = b
    if topic is not None:
        checker = start_quota_gateway(
            quota_tansu.bootstrap, quotas=SUPER, store_topic=topic, store=tmp_path / "other.db"
        ).bootstrap
    deadline = time.monotonic() + 10
    while True:
        drift = _invoke("apply", f, "-b", checker, "--check")
        if drift.exit_code != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # the other gateway reads the topic as it grows
    assert drift.exit_code == 2, drift.output
    assert drift.stdout.splitlines()[0] == "~ change user=alice: producer_byte_rate 1 -> 4096"


def test_apply_usage_errors_exit_2(tmp_path: Path) -> None:
    quota_file = tmp_path / "quotas.toml"
    quota_file.write_text('[[quota]]\nuser = "alice"\nproducer_byte_rate = 1.5\n')
    bad = _invoke("apply", str(quota_file), "-b", "127.0.0.1:1")
    assert bad.exit_code == 2
    assert "producer_byte_rate" in bad.output
    both = _invoke("apply", str(quota_file), "-b", "127.0.0.1:1", "--plan", "--check")
    assert both.exit_code == 2 and "at most one of" in both.output


def test_apply_sets_the_files_broker_settings_as_incremental_alter_configs_does(
    quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    """[broker] of the quota file: the default broker's tenant.mapping.rules and
    quota.exempt.principals reach the gateway's store, with its audit (source
    IncrementalAlterConfigs), exactly as kafka-configs would set them."""
    store = tmp_path / "apply.db"
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=SUPER, store=store)
    sync = gateway.runtime.store_sync
    rules = "RULE:client-id:^team-([a-z]+)-.*$/$1/"
    quota_file = tmp_path / "quotas.toml"
    quota_file.write_text(
        dump_quota_file(
            QuotaFile(
                [QuotaFileEntry({"tenant": "search"}, {"producer_byte_rate": 2e6})],
                tenant_mapping_rules=rules,
                exempt_principals=["User:canary", "User:mm2"],
            )
        )
    )
    planned = _invoke("apply", str(quota_file), "-b", gateway.bootstrap, "--plan")
    assert planned.exit_code == 0, planned.output
    assert f"broker default: tenant.mapping.rules = {rules!r}" in planned.stdout
    assert sync.tenant_mapper.tenant("u", "team-search-1") == ""  # --plan changed nothing
    dry = _invoke("apply", str(quota_file), "-b", gateway.bootstrap, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert sync.tenant_mapper.tenant("u", "team-search-1") == ""

    applied = _invoke("apply", str(quota_file), "-b", gateway.bootstrap)
    assert applied.exit_code == 0, applied.output
    assert "broker default: tenant.mapping.rules, quota.exempt.principals" in applied.stdout
    assert sync.tenant_mapper.tenant("u", "team-search-1") == "search"
    assert gateway.runtime.managers.exempt_users == {"canary", "mm2"}
    history = _invoke("history", "--store", str(store), "-o", "json")
    assert history.exit_code == 0, history.output
    assert "IncrementalAlterConfigs" in history.stdout and "User:canary,User:mm2" in history.stdout

    # --check reads them back (DescribeConfigs of the default broker): in line, then drifted.
    clean = _invoke("apply", str(quota_file), "-b", gateway.bootstrap, "--check")
    assert clean.exit_code == 0, clean.output
    sync.set_exempt_principals(["User:canary"], "User:someone")
    drift = _invoke("apply", str(quota_file), "-b", gateway.bootstrap, "--check")
    assert drift.exit_code == 2, drift.output
    assert "broker default: quota.exempt.principals = 'User:canary,User:mm2'" in drift.stderr
    assert "tenant.mapping.rules" not in drift.stderr  # that one is as the file says

    # The gateway's own rule refuses a bad rule before anything is sent.
    quota_file.write_text('[broker]\n"tenant.mapping.rules" = "RULE:users:x/y/"\n')
    bad = _invoke("apply", str(quota_file), "-b", gateway.bootstrap)
    assert bad.exit_code == 2 and "RULE:user:PATTERN/REPLACEMENT/" in bad.output, bad.output
    assert sync.tenant_mapper.tenant("u", "team-search-1") == "search"
