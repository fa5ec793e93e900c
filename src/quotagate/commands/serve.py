"""``quotagate serve``: run the gateway (with an embedded tansu broker when no upstream is set)."""

from __future__ import annotations

import asyncio
import dataclasses
import faulthandler
import logging
import os
import signal
from collections.abc import Mapping
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Annotated, Any, Final

import typer
import uvloop
from prometheus_client import CollectorRegistry

from quotagate.commands.plugins import load_gateway_config
from quotagate.enforcement import QuotaCollector, QuotaEnforcement
from quotagate.enforcement.settings import QUOTAS_SECTION
from quotagate.gateway import (
    ConfigError,
    EmbeddedBrokerError,
    Gateway,
    GatewayConfig,
    GatewayMetrics,
    HealthServer,
    Readiness,
    TansuBroker,
    freeze_startup_heap,
    health_app,
    parse_host_port,
    parse_workers,
    validate,
    with_overrides,
    workers_ready,
)
from quotagate.gateway.auth import SaslAuthenticatorFactory, authenticator_factory
from quotagate.instance.metrics import WorkersCollector
from quotagate.instance.ports import hold_listen_ports
from quotagate.instance.supervisor import StartError, Supervisor
from quotagate.logs import configure_logging, kv
from quotagate.store.backends import StoreError

log = logging.getLogger(__name__)

DISCOVERY_WAIT_S: Final = 30.0
"""How long a gateway (or worker) waits for its first discovery before it says it is ready
anyway (well inside the supervisor's start timeout)."""


def serve(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", dir_okay=False, help="Gateway TOML config file."),
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(help="HOST:PORT of the (first) listener; overrides the config."),
    ] = None,
    upstream: Annotated[
        str | None,
        typer.Option(help="HOST:PORT of the upstream cluster; overrides bootstrap.servers."),
    ] = None,
    workers: Annotated[
        str | None,
        typer.Option(
            help="Worker processes sharing every port: a number, or 'auto' (one per core); "
            "overrides [gateway] workers."
        ),
    ] = None,
) -> None:
    """Run the Kafka gateway in front of an upstream cluster (or an embedded tansu broker)."""
    try:
        settings = _settings(config, listen, upstream, workers)
        # The SQLite store is checked before anything starts; the upstream's once it runs.
        upstream_store = settings.store_backend == "kafka"
        factory = None if upstream_store else authenticator_factory_for(settings)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    configure_logging(settings.log_level)
    broker: TansuBroker | None = None
    if not settings.bootstrap_servers:
        broker = TansuBroker()
        try:
            broker.start()
        except EmbeddedBrokerError as exc:
            typer.echo(f"error: cannot start the embedded tansu broker: {exc}", err=True)
            raise typer.Exit(1) from None
        typer.echo(
            f"No upstream configured: started an embedded tansu broker at {broker.bootstrap} "
            "(memory storage: its data is gone when quotagate stops)."
        )
        settings = dataclasses.replace(
            settings,
            bootstrap_servers=(parse_host_port("upstream", broker.bootstrap),),
            extra=_with_tansu_partitions(settings.extra),
        )
    try:
        if settings.workers == 1:
            if upstream_store:
                factory = authenticator_factory_for(settings)
            try:
                uvloop.run(_serve(settings, factory))
            finally:
                if factory is not None:
                    factory.close()
        else:
            _serve_workers(settings)
    except (OSError, StartError, ConfigError, StoreError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        if broker is not None:
            broker.stop()
            typer.echo("Embedded tansu broker stopped.")


def authenticator_factory_for(settings: GatewayConfig) -> SaslAuthenticatorFactory | None:
    """The authenticator of SASL listeners (None when no listener uses SASL)."""
    return authenticator_factory(settings)


def _settings(
    config: Path | None, listen: str | None, upstream: str | None, workers: str | None
) -> GatewayConfig:
    settings = load_gateway_config(config)
    settings = with_overrides(
        settings,
        parse_host_port("--listen", listen) if listen is not None else None,
        parse_host_port("--upstream", upstream) if upstream is not None else None,
    )
    if workers is not None:
        count = parse_workers("--workers", workers if workers == "auto" else _number(workers))
        settings = validate(dataclasses.replace(settings, workers=count))
    return settings


def _with_tansu_partitions(
    extra: Mapping[str, Mapping[str, Any]],
) -> dict[str, Mapping[str, Any]]:
    """The embedded broker's default partition count as [quotas] num.partitions, unless the
    file sets one: what a CreateTopics without a count mutates, which tansu cannot be asked."""
    quotas = {"num.partitions": TansuBroker.DEFAULT_PARTITIONS, **extra.get(QUOTAS_SECTION, {})}
    return {**extra, QUOTAS_SECTION: quotas}


def _number(text: str) -> int | str:
    return int(text) if text.strip().isdigit() else text


def _serve_workers(settings: GatewayConfig) -> None:
    """A supervisor and ``settings.workers`` worker processes on shared ports."""
    settings, held = hold_listen_ports(settings)
    supervisor = Supervisor(settings, run_worker)
    supervisor.install_signal_handlers()
    metrics = None
    try:
        # Bound before the workers start: a port they take (their own metrics, broker ports)
        # can then never be the configured one.
        address = settings.metrics_listen
        if address is not None:
            registry = CollectorRegistry()
            registry.register(WorkersCollector(supervisor.metrics_endpoints))
            readiness = Readiness()
            readiness.add("workers", workers_ready(supervisor.metrics_endpoints))
            metrics = HealthServer(address, health_app(registry, readiness))
        supervisor.start()
        for listener in settings.listeners:
            typer.echo(
                f"quotagate is serving listener {listener.name} ({listener.security_protocol}) "
                f"with {settings.workers} workers. Point clients at it with: "
                f"bootstrap.servers={listener.advertised_host}:{listener.listen.port}"
            )
        upstream = ",".join(str(a) for a in settings.bootstrap_servers)
        typer.echo(f"Upstream cluster: {upstream}. Stop with Ctrl-C.")
        if metrics is not None and address is not None:
            port = metrics.address.port
            typer.echo(f"Prometheus metrics (all workers): http://{address.host}:{port}/metrics")
        supervisor.run()
    finally:
        if metrics is not None:
            metrics.stop()
        for sock in held:
            sock.close()


def run_worker(settings: GatewayConfig, index: int, ready: Queue[int]) -> None:
    """One worker process of a multi-process instance (the supervisor's target)."""
    configure_logging(settings.log_level, worker=index)
    factory = authenticator_factory_for(settings)
    try:
        uvloop.run(_serve(settings, factory, worker=index, ready=ready))
    finally:
        if factory is not None:
            factory.close()


async def _serve(
    settings: GatewayConfig,
    factory: SaslAuthenticatorFactory | None,
    *,
    worker: int | None = None,
    ready: Queue[int] | None = None,
) -> None:
    # Installed before anything starts, so that a stop request during start-up still gets
    # the draining shutdown; SIGUSR1 dumps every thread's stack (a gateway that seems stuck
    # can say where).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    metrics = GatewayMetrics()
    member = f"{settings.gateway_id}/{worker or 0}"
    enforcement = QuotaEnforcement.from_config(settings, member=member)
    metrics.registry.register(QuotaCollector(enforcement.runtime))
    gateway = Gateway(
        settings, authenticator_factory=factory, metrics=metrics, plugins=[enforcement]
    )
    await gateway.start()
    freeze_startup_heap()
    # Ready once the broker ports are open too: a worker's clients that arrive earlier are
    # told ports only the workers already open take, and stay there while connected. An
    # upstream still unreachable after the wait does not hold the start back, and says so.
    if not await gateway.discovered(DISCOVERY_WAIT_S):
        log.warning(kv("ready_before_discovery", worker=worker or 0, waited_s=DISCOVERY_WAIT_S))
    if worker is not None and ready is not None:
        ready.put(worker)
        # A worker whose supervisor is gone (killed) stops rather than serve on unwatched.
        supervisor = os.getppid()
        watch = loop.create_task(_stop_when_orphaned(supervisor, stop))
        await stop.wait()
        watch.cancel()
        await gateway.shutdown()
        return
    for name, address in gateway.bootstrap.items():
        listener = gateway.listeners[name].config
        typer.echo(
            f"quotagate is serving listener {name} ({listener.security_protocol}). "
            f"Point clients at it with: bootstrap.servers={address}"
        )
    upstream = ",".join(str(a) for a in settings.bootstrap_servers)
    typer.echo(f"Upstream cluster: {upstream}. Stop with Ctrl-C.")
    if gateway.metrics_address is not None:
        typer.echo(f"Prometheus metrics: http://{gateway.metrics_address}/metrics")
    await stop.wait()
    typer.echo("Shutting down: draining in-flight requests...")
    await gateway.shutdown()


async def _stop_when_orphaned(parent: int, stop: asyncio.Event) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    stop.set()
