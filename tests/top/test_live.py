"""``quotagate top`` in a real terminal (tmux) on a real gateway with a real throttled client.

A greedy confluent-kafka producer runs through ``quotagate serve`` under a producer quota;
``quotagate top`` watches the gateway's /metrics from inside tmux. Once the gateway's own
endpoint shows the client over its quota and throttled, the terminal must show that row
within two refreshes. The last screen is kept as test output (``top-screen.txt``, see the
``test_output`` fixture).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.gateway.embedded import TansuBroker, free_port
from quotagate.top.model import parse
from quotagate.top.scrape import scrape

pytestmark = pytest.mark.integration

QUOTA = 40_000  # bytes/s for client.id "greedy"
INTERVAL_S = 1.0
# Two refreshes, plus what one refresh itself takes (a scrape and a redraw).
WITHIN_S = 2 * INTERVAL_S + 0.5
BIN = Path(sys.executable).parent


@pytest.fixture
def served(tansu: TansuBroker, tmp_path: Path, wait_for: Callable[..., Any]) -> Iterator[Any]:
    """``quotagate serve`` in front of ``tansu``: (bootstrap, metrics URL)."""
    port, metrics_port = free_port(), free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'[upstream]\n"bootstrap.servers" = "{tansu.bootstrap}"\n'
        f'[[listeners]]\nlisten = "127.0.0.1:{port}"\nbroker.port.start = {free_port()}\n'
        "broker.node.id.start = 111\nbroker.port.count = 1\n"
        f'[metrics]\nlisten = "127.0.0.1:{metrics_port}"\n'
        f'[store]\npath = "{tmp_path / "quotagate.db"}"\n'
        # PLAINTEXT clients are ANONYMOUS: it may alter quotas, and is still held to them.
        '[quotas]\n"super.users" = ["User:ANONYMOUS"]\n'
    )
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [str(BIN / "quotagate"), "serve", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        wait_for(lambda: scrape(url, 1.0).text is not None, 60, "the gateway's /metrics")
        yield f"127.0.0.1:{port}", url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class Tmux:
    """A tmux server of this test's own (its own socket), so nothing else is touched."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.socket = f"quotagate-top-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str) -> str:
        return subprocess.run(
            [self.binary, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
            env={**os.environ, "TERM": "xterm-256color"},
        ).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "top")

    def stop(self) -> None:
        subprocess.run([self.binary, "-L", self.socket, "kill-server"], check=False, timeout=10)


def _greedy(bootstrap: str, topic: str, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "greedy", "linger.ms": 5})
    value = b"v" * 4000
    while not stop.is_set():
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.05)
        except KafkaException:
            return
        producer.poll(0)
    producer.purge()
    producer.flush(5)


def _greedy_row(screen: str) -> str | None:
    return next(
        (
            line
            for line in screen.splitlines()
            if "client-id=greedy" in line and "OVER QUOTA" in line and "THROTTLED" in line
        ),
        None,
    )


def test_a_throttled_client_appears_within_two_refreshes(
    served: tuple[str, str], test_output: Path, wait_for: Callable[..., Any]
) -> None:
    binary = shutil.which("tmux")
    # `make test` installs it; a missing tmux must fail the check, not skip it quietly.
    assert binary is not None, "Debian's tmux is not installed: run `make tools`"
    bootstrap, url = served
    altered = subprocess.run(
        [
            str(BIN / "quotagate"),
            "quotas",
            "alter",
            "-b",
            bootstrap,
            "--entity-type",
            "clients",
            "--entity-name",
            "greedy",
            "--add-config",
            f"producer_byte_rate={QUOTA}",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert altered.returncode == 0, altered.stdout + altered.stderr
    topic = f"top-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)

    tmux = Tmux(binary)
    stop = threading.Event()
    producer = threading.Thread(target=_greedy, args=(bootstrap, topic, stop), daemon=True)
    screen = ""
    try:
        tmux.run(
            "new-session", "-d", "-s", "top", "-x", "200", "-y", "30",
            f"{BIN / 'quotagate'} top --metrics {url} --interval {INTERVAL_S}",
        )  # fmt: skip
        wait_for(lambda: "1/1 endpoints" in tmux.screen(), 30, "top's first screen")
        assert _greedy_row(tmux.screen()) is None
        producer.start()

        def gateway_says_throttled() -> bool:
            rows = parse([scrape(url, 1.0)]).rows
            # One scrape cannot say "throttled now" (top measures it between two): the
            # gateway's throttle counter says it has throttled the client.
            return any(
                r.client_id == "greedy" and r.over_quota and r.throttle_total_ms > 0 for r in rows
            )

        wait_for(gateway_says_throttled, 60, "the gateway to throttle the greedy client")
        seen_at = time.monotonic()
        screen = wait_for(
            lambda: tmux.screen() if _greedy_row(tmux.screen()) else "",
            WITHIN_S,
            f"the greedy row on top's screen within {WITHIN_S} s",
        )
        assert time.monotonic() - seen_at <= WITHIN_S
        row = _greedy_row(screen)
        assert row is not None and "produce" in row and "7 client-id" in row

        # A fleet of two endpoints, one of them down: the row is still there, and the
        # endpoint that did not answer is named, in one frame and without a traceback.
        dead = f"127.0.0.1:{free_port()}"
        once = subprocess.run(
            [str(BIN / "quotagate"), "top", "--once", "-m", url, "-m", dead],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
        assert once.returncode == 0, once.stdout + once.stderr
        assert "1/2 endpoints" in once.stdout and "client-id=greedy" in once.stdout
        assert f"unreachable: http://{dead}/metrics: connection refused" in once.stdout
        assert "Traceback" not in once.stdout + once.stderr
    finally:
        screen = (screen or _safe_screen(tmux)).rstrip()
        (test_output / "top-screen.txt").write_text(screen + "\n")
        print(f"top's screen:\n{screen}")  # shown with -rA: the test's output
        stop.set()
        producer.join(10) if producer.is_alive() else None
        tmux.stop()


def _safe_screen(tmux: Tmux) -> str:
    try:
        return tmux.screen()
    except (subprocess.SubprocessError, OSError):
        return ""
