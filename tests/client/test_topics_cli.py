"""``quotagate topics`` through the gateway to a real tansu broker."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.gateway.embedded.background import BackgroundGateway

pytestmark = pytest.mark.integration


def _topics(bootstrap: str) -> dict[str, int]:
    metadata = ConfluentAdmin({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def test_create_and_delete(gateway: BackgroundGateway) -> None:
    bootstrap = str(gateway.bootstrap)
    run = uuid.uuid4().hex[:8]
    a, b = f"cli-{run}-a", f"cli-{run}-b"
    runner = CliRunner()
    created = runner.invoke(
        app,
        [
            *("topics", "create", a, b, "--bootstrap-server", bootstrap),
            *("--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=60000"),
        ],
    )
    assert created.exit_code == 0, created.output
    assert f"Created topic {a}." in created.stdout
    assert f"Created topic {b}." in created.stdout
    seen = _topics(bootstrap)
    assert (seen.get(a), seen.get(b)) == (3, 3)

    duplicate = runner.invoke(app, ["topics", "create", a, "--bootstrap-server", bootstrap])
    assert duplicate.exit_code == 1
    assert f"Error while creating topic {a}: TOPIC_ALREADY_EXISTS (36):" in duplicate.stderr

    deleted = runner.invoke(app, ["topics", "delete", a, b, "--bootstrap-server", bootstrap])
    assert deleted.exit_code == 0, deleted.output
    assert not {a, b} & set(_topics(bootstrap))


def test_add_partitions_reports_the_error_code(gateway: BackgroundGateway) -> None:
    result = CliRunner().invoke(
        app,
        [
            *("topics", "add-partitions", "t", "--partitions", "4"),
            *("--bootstrap-server", str(gateway.bootstrap), "--timeout-ms", "5000"),
        ],
    )
    assert result.exit_code == 1
    assert "Error while adding partitions to topic t: UNSUPPORTED_VERSION (35):" in result.stderr


def test_unreachable_bootstrap_fails_with_a_timeout() -> None:
    result = CliRunner().invoke(
        app,
        [
            *("topics", "create", "t", "--bootstrap-server", f"{LOOPBACK}:{free_port()}"),
            *("--timeout-ms", "300"),
        ],
    )
    assert result.exit_code == 1
    assert "REQUEST_TIMED_OUT (7): Call(callName=createTopics) timed out" in result.stderr


def test_bad_arguments() -> None:
    runner = CliRunner()
    bad_server = runner.invoke(app, ["topics", "create", "t", "--bootstrap-server", "nohost"])
    assert bad_server.exit_code == 2
    assert "HOST:PORT" in bad_server.output
    bad_config = runner.invoke(
        app, ["topics", "create", "t", "--bootstrap-server", "127.0.0.1:1", "--config", "x"]
    )
    assert bad_config.exit_code == 2
    assert "KEY=VALUE" in bad_config.output
