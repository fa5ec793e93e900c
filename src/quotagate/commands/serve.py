"""``quotagate serve``: run the gateway (with an embedded tansu broker when no upstream is set)."""

from __future__ import annotations

import asyncio
import dataclasses
import faulthandler
import signal
from pathlib import Path
from typing import Annotated

import typer
import uvloop

from quotagate.enforcement import QuotaCollector, QuotaEnforcement
from quotagate.gateway.auth import setup as sasl_setup
from quotagate.gateway.auth.authenticator import AuthenticatorFactory
from quotagate.gateway.config import (
    ConfigError,
    GatewayConfig,
    load_config,
    parse_host_port,
    validate,
    with_overrides,
)
from quotagate.gateway.embedded import EmbeddedBrokerError, TansuBroker
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.gateway.server import Gateway
from quotagate.logs import configure_logging


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
) -> None:
    """Run the Kafka gateway in front of an upstream cluster (or an embedded tansu broker)."""
    try:
        settings = _settings(config, listen, upstream)
        factory = authenticator_factory_for(settings)
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
            settings, bootstrap_servers=(parse_host_port("upstream", broker.bootstrap),)
        )
    try:
        uvloop.run(_serve(settings, factory))
    except OSError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        if broker is not None:
            broker.stop()
            typer.echo("Embedded tansu broker stopped.")


def authenticator_factory_for(settings: GatewayConfig) -> AuthenticatorFactory | None:
    """The authenticator of SASL listeners (None when no listener uses SASL)."""
    return sasl_setup.authenticator_factory(settings)


def _settings(config: Path | None, listen: str | None, upstream: str | None) -> GatewayConfig:
    settings = load_config(config) if config is not None else validate(GatewayConfig())
    return with_overrides(
        settings,
        parse_host_port("--listen", listen) if listen is not None else None,
        parse_host_port("--upstream", upstream) if upstream is not None else None,
    )


async def _serve(settings: GatewayConfig, factory: AuthenticatorFactory | None) -> None:
    # Installed before anything starts, so that a stop request during start-up still gets
    # the draining shutdown; SIGUSR1 dumps every thread's stack (a gateway that seems stuck
    # can say where).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    metrics = GatewayMetrics()
    enforcement = QuotaEnforcement.from_config(settings)
    metrics.registry.register(QuotaCollector(enforcement.runtime))
    gateway = Gateway(
        settings, authenticator_factory=factory, metrics=metrics, plugins=[enforcement]
    )
    await gateway.start()
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
