"""``quotagate top``: a live table of every sharing key against its quota, from /metrics."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, RenderableType
from rich.live import Live

from quotagate.commands.plugins import load_gateway_config
from quotagate.gateway import ConfigError
from quotagate.top.model import SORTS, ThrottleHistory, check_groups
from quotagate.top.scrape import scrape_all
from quotagate.top.view import frame

DEFAULT_METRICS = "http://127.0.0.1:9404/metrics"


def top(
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            "-m",
            help="A Prometheus endpoint (URL or HOST:PORT); repeat it for every instance of a "
            f"fleet. Default: {DEFAULT_METRICS}",
        ),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            "-c",
            help="Take the endpoint from a config's [metrics] listen; repeatable.",
        ),
    ] = None,
    sort: Annotated[str, typer.Option("--sort", "-s", help=f"One of {', '.join(SORTS)}.")] = (
        "usage"
    ),
    pattern: Annotated[
        str | None,
        typer.Option(
            "--filter",
            "-f",
            help="Show the sharing keys whose name (user=… client-id=…) contains this, or "
            "matches it as a glob (alice*, *-batch).",
        ),
    ] = None,
    types: Annotated[
        list[str] | None,
        typer.Option("--type", "-t", help="produce, fetch, request or mutation; repeatable."),
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes.", min=0.1)] = 1.0,
    window: Annotated[
        float, typer.Option(help="Seconds the 'throttled' column looks back over.", min=1.0)
    ] = 10.0,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Print one table and exit: two scrapes --interval apart, so that the "
            "'throttled' column measures that interval.",
        ),
    ] = False,
) -> None:
    """Who is throttled now: each sharing key's rate against its quota, live."""
    if sort not in SORTS:
        raise typer.BadParameter(f"expected one of {', '.join(SORTS)}", param_hint="--sort")
    types = types or []
    try:
        check_groups(types)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--type") from None
    urls = [endpoint_url(m) for m in metrics or []] + [_from_config(p) for p in config or []]
    urls = urls or [DEFAULT_METRICS]
    # Throttling is a difference of two scrapes: --once takes its two --interval apart.
    history = ThrottleHistory(interval if once else window)
    console = Console()
    timeout_s = max(min(interval * 0.8, 5.0), 0.2)
    with ThreadPoolExecutor(max_workers=min(len(urls), 16)) as pool:

        def refresh() -> tuple[RenderableType, int]:
            scrapes = scrape_all(pool, urls, timeout_s)
            picture, snapshot = frame(
                scrapes,
                history,
                time.monotonic(),
                sort=sort,
                pattern=pattern,
                groups=types,
                clock=time.strftime("%H:%M:%S"),
            )
            return picture, snapshot.answered

        if once:
            refresh()
            time.sleep(interval)
            picture, answered = refresh()
            console.print(picture)
            if not answered:
                raise typer.Exit(1)
            return
        try:
            with Live(console=console, screen=True, auto_refresh=False) as live:
                while True:
                    started = time.monotonic()
                    picture, _ = refresh()
                    live.update(picture, refresh=True)
                    time.sleep(max(0.0, interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            pass


def endpoint_url(text: str) -> str:
    """``HOST:PORT`` is a gateway's metrics listener; a URL is taken as it is."""
    if "://" in text:
        return text
    return f"http://{text.rstrip('/')}/metrics"


def _from_config(path: Path) -> str:
    try:
        settings = load_gateway_config(path)
    except (OSError, ConfigError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--config") from None
    address = settings.metrics_listen
    if address is None:
        raise typer.BadParameter(
            f"{path} has no [metrics] listen: the gateway it configures exports no metrics",
            param_hint="--config",
        )
    # A wildcard listen address is reached on loopback from the same machine.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(address.host, address.host)
    return endpoint_url(f"[{host}]:{address.port}" if ":" in host else f"{host}:{address.port}")
