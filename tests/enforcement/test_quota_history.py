"""``quotagate quotas history``: changes made through a SASL gateway's admin API, read back
from either store backend with the principal that made them; and the exit codes of a SASL
principal that may not alter quotas (3) and of a login the gateway refuses (3, at once)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from quotagate.cli import app
from quotagate.store.backends import KAFKA, StoreSettings, open_credentials

pytestmark = pytest.mark.integration
runner = CliRunner()
PASSWORDS = {"admin": "Admin-Pa55", "eve": "Eve-Pa55"}


def _properties(path: Path, user: str, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n'
    )
    return path


def _quotas(*args: str) -> Result:
    return runner.invoke(app, ["quotas", *args])


@pytest.mark.parametrize("backend", ["sqlite", "kafka"])
def test_history_names_the_sasl_principal(
    backend: str, quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    db = tmp_path / "quotagate.db"
    topic = f"_quotagate.history-{uuid.uuid4().hex[:8]}.config"
    settings = (
        StoreSettings(backend=KAFKA, topic=topic, bootstrap=quota_tansu.bootstrap)
        if backend == KAFKA
        else StoreSettings(path=str(db))
    )
    credentials = open_credentials(settings)
    for user, password in PASSWORDS.items():
        credentials.set_password(user, password, iterations=4096)
    credentials.close()
    gateway = start_quota_gateway(
        quota_tansu.bootstrap,
        quotas={"super.users": ["User:admin"]},
        security_protocol="SASL_PLAINTEXT",
        sasl=True,
        store=db,
        store_topic=topic if backend == KAFKA else None,
    )
    b = ["-b", gateway.bootstrap]
    admin = [
        "--command-config",
        str(_properties(tmp_path / "admin.properties", "admin", PASSWORDS["admin"])),
    ]
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    for config in ("producer_byte_rate=1024", "producer_byte_rate=2048"):
        result = _quotas("alter", *b, *admin, *alice, "--add-config", config)
        assert result.exit_code == 0, result.output
    batch = ["--entity-type", "clients", "--entity-name", "batch"]
    assert (
        _quotas("alter", *b, *admin, *batch, "--add-config", "consumer_byte_rate=10").exit_code == 0
    )
    removed = _quotas("alter", *b, *admin, *alice, "--delete-config", "producer_byte_rate")
    assert removed.exit_code == 0, removed.output

    # eve logs in but is no super user: refused by the gateway (3), nothing stored.
    eve = [
        "--command-config",
        str(_properties(tmp_path / "eve.properties", "eve", PASSWORDS["eve"])),
    ]
    refused = _quotas("alter", *b, *eve, *alice, "--add-config", "producer_byte_rate=1")
    assert refused.exit_code == 3, refused.output
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.output
    # A wrong password: refused (3) at once, not retried until the default 60 s timeout,
    # with a message that says what to fix.
    wrong = ["--command-config", str(_properties(tmp_path / "wrong.properties", "admin", "nope"))]
    began = time.monotonic()
    refused_login = _quotas("describe", *b, *wrong)
    assert refused_login.exit_code == 3, refused_login.output
    assert time.monotonic() - began < 15, "a refused login was retried"
    assert "SASL_AUTHENTICATION_FAILED" in refused_login.output
    assert "--command-config" in refused_login.output
    # The tenant settings, as IncrementalAlterConfigs on the default broker stores them.
    gateway.runtime.store_sync.set_tenant_rules("RULE:user:^(.*)-svc$/$1/", "User:admin")
    gateway.runtime.store_sync.set_tenant_rules(None, "User:admin")

    if backend == KAFKA:
        config_file = tmp_path / "gateway.toml"
        config_file.write_text(
            f'[upstream]\nbootstrap.servers = "{quota_tansu.bootstrap}"\n'
            f'[store]\nbackend = "kafka"\ntopic = "{topic}"\n'
        )
        store = ["--config", str(config_file)]
    else:
        store = ["--store", str(db)]
    listed = _quotas("history", *store, "-o", "json")
    assert listed.exit_code == 0, listed.output
    listed_all = json.loads(listed.stdout)
    changes = [c for c in listed_all if "entity" in c]
    assert [
        (c["principal"], c["setting"], c["old"], c["new"], c["source"])
        for c in listed_all
        if "setting" in c
    ] == [
        (
            "User:admin",
            "tenant.mapping.rules",
            None,
            "RULE:user:^(.*)-svc$/$1/",
            "IncrementalAlterConfigs",
        ),
        (
            "User:admin",
            "tenant.mapping.rules",
            "RULE:user:^(.*)-svc$/$1/",
            None,
            "IncrementalAlterConfigs",
        ),
    ]
    assert listed_all[-1]["setting"] == "tenant.mapping.rules"  # oldest first, merged
    assert [
        (c["principal"], c["entity"][0]["entity_name"], c["key"], c["old"], c["new"])
        for c in changes
    ] == [
        ("User:admin", "alice", "producer_byte_rate", None, 1024.0),
        ("User:admin", "alice", "producer_byte_rate", 1024.0, 2048.0),
        ("User:admin", "batch", "consumer_byte_rate", None, 10.0),
        ("User:admin", "alice", "producer_byte_rate", 2048.0, None),
    ]
    assert all(c["source"].startswith("AlterClientQuotas from 127.0.0.1:") for c in changes)

    text = _quotas("history", *store, *alice, "--since", "1h").stdout.splitlines()
    assert [line.split(" ", 1)[1].rsplit(" (", 1)[0] for line in text] == [
        "User:admin user=alice: producer_byte_rate (none) -> 1024",
        "User:admin user=alice: producer_byte_rate 1024 -> 2048",
        "User:admin user=alice: producer_byte_rate 2048 -> (none)",
    ]
    settings_text = [
        line for line in _quotas("history", *store).stdout.splitlines() if "broker default" in line
    ]
    assert settings_text[0].split(" ", 1)[1] == (
        "User:admin broker default: tenant.mapping.rules (none) -> 'RULE:user:^(.*)-svc$/$1/' "
        "(IncrementalAlterConfigs)"
    )
    only_clients = _quotas("history", *store, "--entity-type", "clients", "-o", "json")
    assert [c["key"] for c in json.loads(only_clients.stdout)] == ["consumer_byte_rate"]
    future = _quotas("history", *store, "--since", "2999-01-01T00:00:00Z")
    assert future.stdout.splitlines() == ["No changes match."]


def test_history_usage_errors(tmp_path: Path) -> None:
    unnamed = _quotas("history")
    assert unnamed.exit_code == 2 and "--config gateway.toml" in unnamed.output
    since = _quotas("history", "--store", str(tmp_path / "q.db"), "--since", "yesterday")
    assert since.exit_code == 2 and "an age (30m, 7d)" in since.output
