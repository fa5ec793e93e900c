"""What ``quotagate top`` prints, and how it says an endpoint cannot be reached."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from rich.console import Console
from typer.testing import CliRunner

from quotagate.cli import app
from quotagate.enforcement.metrics import QuotaCollector
from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.store.quotas import Change
from quotagate.top.model import KINDS, Row, Scrape, ThrottleHistory
from quotagate.top.scrape import scrape
from quotagate.top.view import frame, usage_bar

NOW = 1_700_000_000_000


def _text() -> str:
    runtime = QuotaRuntime(QuotaSettings())
    runtime.store_sync.alter_client_quotas(
        [
            Change({"client-id": "greedy"}, "producer_byte_rate", 1000.0),
            Change({"client-id": None}, "producer_byte_rate", 1e6),
        ],
        "t",
        "t",
    )
    produce = runtime.managers.produce
    produce.record_and_get_throttle_ms("ANONYMOUS", "greedy", 30_000, NOW)
    produce.throttle("ANONYMOUS", "greedy", 1, 2000, NOW)
    produce.record_and_get_throttle_ms("ANONYMOUS", "polite", 10, NOW)
    runtime.clients.update({1: ("ANONYMOUS", "greedy")})
    runtime.last_now_ms = NOW
    runtime.tick(NOW)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    return generate_latest(registry).decode()


def _plain(renderable: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_greedy_row_comes_first_over_quota() -> None:
    """One scrape: over its quota, and not yet said to be throttled (that takes two scrapes,
    test_once_measures_the_throttled_column_between_two_scrapes)."""
    picture, _ = frame([Scrape("http://gw/metrics", _text())], ThrottleHistory(10), 0.0)
    lines = _plain(picture).splitlines()
    assert "1/1 endpoints" in lines[0] and "2 of 2 sharing keys" in lines[0]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]
    greedy, polite = rows
    assert greedy[:2] == ["produce", "client-id=greedy"]
    assert "300%" in greedy[2] and "3.0k/1.0k B/s" in greedy[2]
    assert greedy[3:] == ["–", "2,000 ms", "1", "7 client-id", "OVER QUOTA"]
    assert polite[1] == "client-id=polite" and "0%" in polite[2]
    assert polite[3:] == ["–", "–", "0", "8 default-client-id", "ok"]


def test_a_filter_that_matches_nothing_says_so() -> None:
    picture, _ = frame([Scrape("u", _text())], ThrottleHistory(10), 0.0, pattern="nobody")
    assert "no sharing key matches the filter" in _plain(picture)


def test_the_bar_fills_to_the_quota_and_stops() -> None:
    produce = KINDS[0]
    half = _plain(usage_bar(Row(produce, "", "c", rate=500.0, quota=1000.0), width=10))
    assert half.startswith("█████░░░░░") and "50%" in half
    over = _plain(usage_bar(Row(produce, "", "c", rate=4000.0, quota=1000.0), width=10))
    assert over.startswith("██████████ ") and "400%" in over
    assert "no quota" in _plain(usage_bar(Row(produce, "", "c", rate=5.0), width=10))


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_endpoint_is_a_sentence() -> None:
    url = f"http://127.0.0.1:{_dead_port()}/metrics"
    result = scrape(url, 1.0)
    assert result.text is None and result.error is not None
    assert "connection refused" in result.error
    picture, _ = frame([result], ThrottleHistory(10), 0.0)
    assert f"unreachable: {url}: connection refused" in _plain(picture)


def test_the_command_says_what_is_unreachable_without_a_traceback() -> None:
    port = _dead_port()
    result = CliRunner().invoke(app, ["top", "--once", "--metrics", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert f"http://127.0.0.1:{port}/metrics" in result.output
    assert "connection refused" in result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # typer.Exit(1), not an error


def test_a_config_without_metrics_is_refused_with_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("q.toml").write_text('[upstream]\n"bootstrap.servers" = "127.0.0.1:9092"\n')
    result = CliRunner().invoke(app, ["top", "--once", "--config", "q.toml"])
    assert result.exit_code == 2
    assert "q.toml has no [metrics] listen" in result.output


def _fleet_text(worker: int, healthy: int, echo_p99: float, silent: int) -> str:
    return (
        f'quotagate_fleet_exchange_healthy{{worker="{worker}"}} {healthy}\n'
        f'quotagate_fleet_report_echo_ms{{quantile="0.99",worker="{worker}"}} {echo_p99}\n'
        f'quotagate_fleet_peers{{state="live",worker="{worker}"}} {3 - silent}\n'
        f'quotagate_fleet_peers{{state="silent",worker="{worker}"}} {silent}\n'
    )


def test_the_fleet_line_says_health_echo_delay_and_fallback() -> None:
    calm = _fleet_text(0, 1, 12, 0) + _fleet_text(1, 1, 9, 0)
    picture, snapshot = frame([Scrape("http://gw/metrics", calm)], ThrottleHistory(10), 0.0)
    assert "fleet exchange: 2/2 workers healthy  echo p99 12 ms  fallback off" in _plain(picture)
    troubled = _fleet_text(0, 0, 4_000, 3) + _fleet_text(1, 1, 9, 1)
    picture, snapshot = frame([Scrape("http://gw/metrics", troubled)], ThrottleHistory(10), 0.0)
    assert snapshot.fleet.fallback
    text = _plain(picture)
    assert "1/2 workers healthy  echo p99 4,000 ms" in text
    assert "fallback ON (fair share for up to 3 silent peers per worker)" in text


def test_no_fleet_line_without_a_fleet() -> None:
    picture, _ = frame([Scrape("http://gw/metrics", _text())], ThrottleHistory(10), 0.0)
    assert "fleet exchange" not in _plain(picture)


def _tenant_text(throttle_ms: int, *, default: bool = False) -> str:
    """A tenant over its quota (its own, or the default tenant's), throttled ``throttle_ms``
    in all; 0 is the tenant before its throttle, or idle since the last one."""
    runtime = QuotaRuntime(QuotaSettings())
    entity = {"tenant": None} if default else {"tenant": "team"}
    runtime.store_sync.alter_client_quotas([Change(entity, "producer_byte_rate", 500.0)], "t", "t")
    tenants = runtime.managers.tenants
    assert tenants is not None
    tenants.produce.record_and_get_throttle_ms("team", "", 30_000, NOW)
    if throttle_ms:
        tenants.produce.throttle("team", "", 1, throttle_ms, NOW)
    runtime.last_now_ms = NOW
    runtime.tick(NOW)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(runtime))
    return generate_latest(registry).decode()


def _tenant_cells(picture: object) -> list[str]:
    """The tenant row's cells: type, key, bar, throttled, avg, conns, source, state."""
    (line,) = [line for line in _plain(picture).splitlines() if "tenant=team" in line]
    return [cell.strip() for cell in line.split("│")[1:-1]]


def test_a_tenant_row_names_its_quota_source() -> None:
    picture, _ = frame([Scrape("u", _tenant_text(0))], ThrottleHistory(10), 0.0)
    cells = _tenant_cells(picture)
    assert cells[0] == "tenant produce" and cells[6] == "tenant"
    picture, _ = frame([Scrape("u", _tenant_text(0, default=True))], ThrottleHistory(10), 0.0)
    assert _tenant_cells(picture)[6] == "default-tenant"


def test_an_idle_tenant_is_not_throttled_though_kafkas_average_remembers() -> None:
    """Throttled once, then idle: Kafka's throttle-time average keeps the throttle for up to a
    minute, the total stops growing, and the row is not THROTTLED, from the first scrape on."""
    throttled = _tenant_text(2_000)
    history = ThrottleHistory(10)
    first, _ = frame([Scrape("u", throttled)], history, 0.0)
    cells = _tenant_cells(first)
    assert cells[3:5] == ["–", "2,000 ms"] and cells[7] == "OVER QUOTA"
    idle, _ = frame([Scrape("u", throttled)], history, 10.0)
    cells = _tenant_cells(idle)
    assert cells[3:5] == ["0%", "2,000 ms"]  # Kafka's average still holds the throttle
    assert cells[7] == "OVER QUOTA"


def test_once_measures_the_throttled_column_between_two_scrapes() -> None:
    """``top --once``: the throttled column is filled, the throttled key says so and the
    others do not."""
    texts = iter([_tenant_text(0), _tenant_text(60_000)])
    with _metrics_server(lambda: next(texts)) as address:
        args = ["top", "--once", "--interval", "0.1", "--metrics", address]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "throttled 0.1s" in result.output
    (line,) = [line for line in result.output.splitlines() if "tenant=team" in line]
    cells = [cell.strip() for cell in line.split("│")[1:-1]]
    assert cells[3] == "100%" and cells[7] == "OVER QUOTA THROTTLED"


@contextlib.contextmanager
def _metrics_server(text: Callable[[], str]) -> Iterator[str]:
    """A /metrics endpoint answering each scrape with the next ``text()``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test's output is top's, not the server's

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
