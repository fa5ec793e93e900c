"""``quotagate quotas`` against a running gateway; ``quotagate topic-quotas`` on its store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.commands.entity_options import EntityArgsError, parse_entity_args
from quotagate.quota import QuotaFile, QuotaFileEntry, dump_quota_file

runner = CliRunner()


def test_entity_arguments_pair_in_order() -> None:
    args = "--entity-type users --entity-name alice --entity-type clients --entity-default"
    assert parse_entity_args(args.split()) == [("user", "alice"), ("client-id", None)]
    assert parse_entity_args(["--entity-type", "clients"]) == [("client-id", "")]
    with pytest.raises(EntityArgsError):
        parse_entity_args(["--entity-name", "alice"])
    with pytest.raises(EntityArgsError):
        parse_entity_args(["--entity-type", "topics", "--entity-name", "x"])


@pytest.mark.parametrize("command", ["alter", "describe", "apply", "promote", "history"])
def test_help_shows_how_to_name_an_entity_and_the_exit_codes(command: str) -> None:
    result = runner.invoke(app, ["quotas", command, "--help"])
    assert result.exit_code == 0
    # Rich draws boxes and wraps to the terminal: compare the words only.
    words = " ".join(result.output.replace("│", " ").split())
    for option in ("--entity-type users|clients|ips", "--entity-name NAME", "--entity-default"):
        assert option in words
    assert "--entity-type users --entity-name alice --entity-type clients --entity-default" in (
        words
    )
    assert "2 usage error" in words and "3 refused" in words and "4 gateway unreachable" in words


def test_entity_options_pair_in_order_among_other_options() -> None:
    """Options of the command between the entity options do not break the pairs, and a
    wrong pairing is a usage error (2) that says what to write."""
    result = runner.invoke(
        app,
        ["quotas", "alter", "-b", "127.0.0.1:1", "--entity-type", "users",
         "--entity-type", "clients", "--entity-name", "x", "--add-config", "a=1"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--entity-type users needs --entity-name NAME or --entity-default" in " ".join(
        result.output.replace("│", " ").split()
    )


def test_an_unreachable_gateway_exits_4() -> None:
    result = runner.invoke(app, ["quotas", "describe", "-b", "127.0.0.1:1", "--timeout-ms", "500"])
    assert result.exit_code == 4, result.output
    assert "127.0.0.1:1" in result.output
    assert "hint: check --bootstrap-server" in result.output


@pytest.mark.integration
def test_quotas_alter_describe_apply_through_the_gateway(
    quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas={"super.users": ["User:ANONYMOUS"]})
    b = ["--bootstrap-server", gateway.bootstrap]
    result = runner.invoke(
        app,
        ["quotas", "alter", *b, "--entity-type", "users", "--entity-name", "alice",
         "--entity-type", "clients", "--entity-default",
         "--add-config", "producer_byte_rate=1024,request_percentage=12.5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Completed updating config for client-id=<default>, user=alice." in result.output
    quota_file = tmp_path / "quotas.toml"
    quota_file.write_text(
        dump_quota_file(
            QuotaFile([QuotaFileEntry({"client-id": "batch"}, {"consumer_byte_rate": 2048.0})])
        )
    )
    assert runner.invoke(app, ["quotas", "apply", str(quota_file), *b]).exit_code == 0
    described = runner.invoke(app, ["quotas", "describe", *b])
    assert described.exit_code == 0, described.output
    assert described.output.splitlines() == [
        "Quota configs for client-id=<default>, user=alice are "
        "producer_byte_rate=1024, request_percentage=12.5",
        "Quota configs for client-id=batch are consumer_byte_rate=2048",
    ]
    deleted = runner.invoke(
        app,
        ["quotas", "alter", *b, "--entity-type", "clients", "--entity-name", "batch",
         "--delete-config", "consumer_byte_rate"],
    )  # fmt: skip
    assert deleted.exit_code == 0
    as_json = runner.invoke(app, ["quotas", "describe", *b, "--output", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == [
        {
            "entity": [
                {"entity_type": "client-id", "entity_name": None},
                {"entity_type": "user", "entity_name": "alice"},
            ],
            "values": {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        }
    ]
    only_clients = runner.invoke(
        app, ["quotas", "describe", *b, "--entity-type", "clients", "--entity-name", "x",
              "-b", gateway.bootstrap, "--entity-type", "users"],
    )  # fmt: skip
    assert only_clients.exit_code == 0 and only_clients.output == "No quotas match.\n"
    only_clients = runner.invoke(app, ["quotas", "describe", *b, "--entity-type", "clients"])
    assert only_clients.output.splitlines() == [
        "Quota configs for client-id=<default>, user=alice are "
        "producer_byte_rate=1024, request_percentage=12.5"
    ]
    dry = runner.invoke(
        app,
        ["quotas", "alter", *b, "--entity-type", "users", "--entity-name", "bob",
         "--add-config", "producer_byte_rate=7", "--dry-run"],
    )  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert "Validated (nothing changed) for user=bob." in dry.output
    bob = runner.invoke(app, ["quotas", "describe", *b, "--entity-type", "users",
                              "--entity-name", "bob"])  # fmt: skip
    assert bob.output == "No quotas match.\n"
    invalid = runner.invoke(
        app,
        ["quotas", "alter", *b, "--entity-type", "users", "--entity-name", "bob",
         "--add-config", "producer_byte_rate=1.5"],
    )  # fmt: skip
    assert invalid.exit_code == 3  # refused by the gateway (commands/exit_codes.py)
    assert "cannot be a fractional value" in invalid.output


@pytest.mark.integration
def test_topic_quotas_on_the_store_reach_a_running_gateway(
    quota_tansu: Any, start_quota_gateway: Any, tmp_path: Path
) -> None:
    store = tmp_path / "store.db"
    gateway = start_quota_gateway(quota_tansu.bootstrap, store=store)
    s = ["--store", str(store)]
    assert runner.invoke(app, ["topic-quotas", "alter", "--total", "1000", *s]).exit_code == 0
    ok = runner.invoke(app, ["topic-quotas", "alter", "--topic", "a", "--threshold", "600", *s])
    assert ok.exit_code == 0
    too_much = runner.invoke(
        app, ["topic-quotas", "alter", "--topic", "b", "--threshold", "500", *s]
    )
    assert too_much.exit_code == 1 and "above total.bytes.in.per.sec.threshold" in too_much.output
    described = runner.invoke(app, ["topic-quotas", "describe", *s]).output.splitlines()
    assert described == [
        "total.bytes.in.per.sec.threshold = 1000",
        "topic a: bytes.in.per.sec.threshold = 600",
        "topics without a threshold share 400 B/s equally",
    ]
    quota = gateway.runtime.topic_quota
    deadline = time.monotonic() + 10
    while quota.explicit_thresholds != {"a": 600.0} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert quota.total_threshold == 1000.0 and quota.explicit_thresholds == {"a": 600.0}
