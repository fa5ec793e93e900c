"""``quotagate serve`` as a real process (any number of workers) on the upstream-backed store.

Shared by tests/fleet and the fleet benchmarks. Each instance has its own config file, usage
directory and metrics port; instances naming the same ``store_topic`` share configuration.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from quotagate.client import ClientQuotaAlteration, ClientQuotaEntity, SyncAdminClient
from quotagate.gateway.embedded import free_port, free_ports
from quotagate.gateway.upstream.security import parse_upstream_security
from quotagate.instance.supervisor import START_TIMEOUT_S
from quotagate.store.backends import StoreSettings, open_quota_store
from quotagate.store.quotas import Change
from support.fleet_load import CLIENT_ID
from support.gateways import TANSU_NODE_ID
from support.upstreams import Upstream

QUOTAGATE = Path(sys.executable).parent / "quotagate"


class Instance:
    """``quotagate serve`` as a process, with its own store, usage directory and metrics."""

    def __init__(
        self,
        tmp: Path,
        upstream: str | Upstream,
        workers: int,
        exchange: bool,
        quota: float,
        store_topic: str | None = None,
        gateway: str = "",
        upstream_keys: dict[str, str] | None = None,
        windows: tuple[int, int] = (2, 1),
        fleet: str = "",
        fleet_id: str | None = None,
        listener: str = "",
    ) -> None:
        """``gateway``, ``fleet``, ``listener``: more lines of those sections, e.g.
        ``"max.connections.per.ip" = 1``; ``upstream_keys``: ``[upstream]`` security keys
        (TLS, SASL), for the store too; ``windows``: quota.window.num and .size.seconds
        (2 x 1 s by default, which makes 20 s measurable; Kafka's are 11 x 1 s); instances
        given the same ``fleet_id`` and ``store_topic`` are one fleet."""
        upstream_keys = upstream_keys or {}
        node_ids = upstream.node_ids if isinstance(upstream, Upstream) else (TANSU_NODE_ID,)
        upstream = upstream.bootstrap if isinstance(upstream, Upstream) else upstream
        first, count = min(node_ids), max(node_ids) - min(node_ids) + 1
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.usage = tmp / "usage"
        self.metrics_port = free_port()
        store_topic = store_topic or f"_quotagate.test-{uuid.uuid4().hex[:8]}.config"
        self.store_topic = store_topic
        with_quota = open_quota_store(
            StoreSettings(
                backend="kafka",
                topic=store_topic,
                bootstrap=upstream,
                client_config=parse_upstream_security(upstream_keys).librdkafka_config(),
            )
        )
        with_quota.alter_client_quotas(
            [Change({"client-id": CLIENT_ID}, "producer_byte_rate", quota)], "test", "test"
        )
        with_quota.close()
        config = tmp / "quotagate.toml"
        config.write_text(
            f'[gateway]\nid = "w-{uuid.uuid4().hex[:6]}"\n{gateway}\n'
            f'[upstream]\nbootstrap.servers = "{upstream}"\n'
            + "".join(f'"{key}" = "{value}"\n' for key, value in upstream_keys.items())
            + f'[[listeners]]\nlisten = "127.0.0.1:0"\nbroker.port.start = {free_ports(count)}\n'
            f"broker.node.id.start = {first}\nbroker.port.count = {count}\n"
            f"{listener}\n"
            f'[metrics]\nlisten = "127.0.0.1:{self.metrics_port}"\n'
            f'[store]\nbackend = "kafka"\ntopic = "{store_topic}"\n'
            f'[usage]\npath = "{self.usage}"\n'
            f'[quotas]\n"quota.window.num" = {windows[0]}\n'
            f'"quota.window.size.seconds" = {windows[1]}\n'
            '"super.users" = ["User:ANONYMOUS"]\n'
            f'[fleet]\nid = "{fleet_id or "f-" + uuid.uuid4().hex[:6]}"\n'
            f'"exchange.enabled" = {str(exchange).lower()}\n{fleet}\n'
        )
        self.process = subprocess.Popen(
            [str(QUOTAGATE), "serve", "--config", str(config), "--workers", str(workers)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._ready_line = 0
        self.bootstrap = self._wait_for_bootstrap()
        try:
            self._assert_broker_ports_open(workers)
        except AssertionError:
            self.process.kill()  # the test never gets the instance to stop
            raise

    def _wait_for_bootstrap(self) -> str:
        # The reader thread collects the output, so a silent instance fails here after the
        # deadline, with what it printed, instead of blocking a read until the test timeout.
        # The supervisor prints the bootstrap line only once every worker serves, and gives
        # up by itself after START_TIMEOUT_S saying which worker did not start: the deadline
        # leaves it that time (and its stopping of the workers) to say so.
        deadline = time.monotonic() + START_TIMEOUT_S + 45
        seen = 0
        while time.monotonic() < deadline:
            lines = self.lines[seen:]
            for offset, line in enumerate(lines):
                found = re.search(r"bootstrap\.servers=(127\.0\.0\.1:\d+)", line)
                if found:
                    self._ready_line = seen + offset
                    return found[1]
            seen += len(lines)
            if not lines and self.process.poll() is not None:
                break
            time.sleep(0.05)
        self._dump_stacks()
        self.process.kill()
        raise AssertionError("instance did not start:\n" + "".join(self.lines))

    def _assert_broker_ports_open(self, workers: int) -> None:
        """Every worker opened its broker port before the instance said it was ready:
        clients connecting earlier would be told a port only some workers take, and stay
        spread over fewer workers for as long as they are connected (a loaded run once put
        no producer at all on one of four). Workers log before they report ready, into the
        same pipe, so their lines are read before the supervisor's."""
        text = "".join(self.lines[: self._ready_line + 1])
        opened = {
            m[1] or "0" for m in re.finditer(r"(?:worker=(\d+) )?event=broker_port_opened", text)
        }
        assert len(opened) >= workers, f"ready before every broker port was open:\n{text}"

    def _dump_stacks(self) -> None:
        """SIGUSR1 to every worker still up: each prints its threads' stacks (faulthandler,
        registered before the gateway starts), so a worker stuck in its start says where."""
        for pid in self.worker_pids().values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        time.sleep(2)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    def worker_pids(self) -> dict[int, int]:
        return {
            int(m[1]): int(m[2])
            for m in re.finditer(
                r"event=worker_started worker=(\d+) pid=(\d+)", "".join(self.lines)
            )
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError("instance did not stop on SIGTERM") from None
        self._reader.join(10)


def propagation_ms(writer: str, reader: str, value: float, timeout_s: float = 10.0) -> float:
    """Milliseconds from an AlterClientQuotas acknowledged by the gateway at ``writer`` until
    DescribeClientQuotas at ``reader`` answers the new value (polled every 5 ms)."""
    entity = {"client-id": CLIENT_ID}
    wanted = ClientQuotaEntity.of(entity)
    with (
        SyncAdminClient(writer) as alter,
        SyncAdminClient(reader) as describe,
    ):
        describe.describe_client_quotas()  # connected before the clock starts
        result = alter.alter_client_quotas(
            [ClientQuotaAlteration.of(entity, {"producer_byte_rate": value})]
        )
        acknowledged = time.monotonic()
        result.raise_on_error()
        while time.monotonic() - acknowledged < timeout_s:
            quotas = describe.describe_client_quotas()
            if quotas.get(wanted, {}).get("producer_byte_rate") == value:
                return (time.monotonic() - acknowledged) * 1000
            time.sleep(0.005)
    raise AssertionError(f"{reader} did not describe {value} within {timeout_s} s")
