"""``quotagate serve``: configuration mistakes are explained; the embedded broker works."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.commands.plugins import load_gateway_config
from quotagate.gateway.config import ConfigError
from quotagate.gateway.embedded import free_port

runner = CliRunner()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[gateway]\nreconect.backoff.ms = 50\n", 'did you mean "reconnect.backoff.ms"'),
        ('[gateway]\nmax.connections = "many"\n', "max.connections = 'many' is not an integer"),
        ("[gateway]\nsocket.request.max.bytes = 0\n", "out of range"),
        ("[gatway]\n", 'unknown section [gatway] (did you mean "gateway"?)'),
        ('[upstream]\nbootstrap.servers = "localhost"\n', "is not HOST:PORT"),
        (
            '[[listeners]]\nlisten = "127.0.0.1:9092"\nsecurity.protocol = "PLAIN"\n',
            "is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
        ('[[listeners]]\nlisten = "0.0.0.0:9092"\n', "set advertised.host"),
        (
            "[gateway]\nreconnect.backoff.ms = 2000\nreconnect.backoff.max.ms = 1000\n",
            "raise the maximum",
        ),
        ("[gateway\n", "is not valid TOML"),
    ],
)
def test_config_mistakes_say_what_and_how_to_fix(tmp_path: Path, toml: str, message: str) -> None:
    path = _write(tmp_path, toml)
    with pytest.raises(ConfigError) as caught:
        load_gateway_config(path)
    assert message in str(caught.value)
    result = runner.invoke(app, ["serve", "--config", str(path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_cli_arguments_are_explained() -> None:
    result = runner.invoke(app, ["serve", "--listen", "nonsense", "--upstream", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "--listen = 'nonsense' is not HOST:PORT" in result.output
    assert "Traceback" not in result.output


def test_missing_config_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--config", str(tmp_path / "absent.toml")])
    assert result.exit_code == 2
    assert "cannot read config file" in result.output


def test_the_example_config_loads() -> None:
    config = load_gateway_config(Path(__file__).parents[2] / "examples" / "quotagate.toml")
    assert config.listeners[0].port_for_node(111) == 9193
    assert config.bootstrap_servers == ()  # embedded tansu


@pytest.mark.integration
def test_serve_with_an_embedded_broker(tmp_path: Path, wait_for: Any) -> None:
    port = free_port()
    config = _write(
        tmp_path,
        f'[[listeners]]\nlisten = "127.0.0.1:{port}"\nbroker.port.start = {free_port()}\n'
        "broker.node.id.start = 111\nbroker.port.count = 1\n",
    )
    executable = Path(sys.executable).parent / "quotagate"
    process = subprocess.Popen(
        [str(executable), "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        text=True,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        while not any("bootstrap.servers=" in line for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            lines.append(process.stdout.readline())
        output = "".join(lines)
        assert "started an embedded tansu broker at 127.0.0.1:" in output
        assert f"bootstrap.servers=127.0.0.1:{port}" in output
        tansu_port = int(re.search(r"embedded tansu broker at 127\.0\.0\.1:(\d+)", output)[1])  # type: ignore[index]
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        brokers = wait_for(lambda: admin.list_topics(timeout=10).brokers, 30, "metadata")
        assert tansu_port not in {b.port for b in brokers.values()}
        process.send_signal(signal.SIGTERM)
        try:
            rest, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGUSR1)  # the gateway dumps its threads' stacks
            time.sleep(1)  # give the dump a moment to reach the pipe before the kill
            process.kill()
            dump, _ = process.communicate()
            raise AssertionError(f"serve did not stop on SIGTERM:\n{dump}") from None
        assert process.returncode == 0
        assert "Embedded tansu broker stopped." in rest
        # A healthy start says nothing an operator would read as a fault: the quota stages
        # are told tansu's default partition count rather than asking tansu, which closes
        # the connection on that question.
        whole = output + rest
        assert "level=WARNING" not in whole and "level=ERROR" not in whole, whole
        assert "upstream_num_partitions_unknown" not in whole, whole
        assert "closed the connection" not in whole, whole
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
