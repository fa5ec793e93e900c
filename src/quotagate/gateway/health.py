"""Health endpoints beside ``/metrics``: ``/livez`` and ``/readyz``, for Kubernetes probes.

``/livez`` answers 200 while the process serves HTTP at all: a restart cures nothing else.
``/readyz`` answers 200 only when every readiness check passes (listeners open, the upstream
reachable, the quota store loaded, a fleet's exchange healthy) and 503 otherwise, with one
line per failing check in the body, so that ``kubectl describe`` says why. A draining gateway
is not ready before anything else happens, so that a Service stops sending it new clients
while it finishes the ones it has.

The checks run on the HTTP server's thread at each probe: they read state the event loop
owns (plain attributes, read whole) and open no more than one TCP connection each.
"""

from __future__ import annotations

import logging
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from socketserver import ThreadingMixIn
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
"""A readiness check: None when fine, else why not (one line, no secret)."""

UPSTREAM_PROBE_TIMEOUT_S: Final = 1.0
"""Below Kubernetes' default probe timeout (1 s is its minimum), so a probe of an
unreachable upstream answers 'not ready' rather than timing out."""

LIVEZ: Final = "/livez"
READYZ: Final = "/readyz"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class Readiness:
    """The named checks ``/readyz`` runs, and the drain flag that overrides them all."""

    def __init__(self) -> None:
        self._checks: list[tuple[str, Check]] = []
        self._draining = False
        self._lock = threading.Lock()

    def add(self, name: str, check: Check) -> None:
        with self._lock:
            self._checks.append((name, check))

    def drain(self) -> None:
        """Not ready from now on (a stop was asked for)."""
        self._draining = True

    @property
    def draining(self) -> bool:
        return self._draining

    def reasons(self) -> list[str]:
        """Why the gateway is not ready; empty when it is."""
        if self._draining:
            return ["draining: shutting down, finishing in-flight requests"]
        with self._lock:
            checks = list(self._checks)
        reasons: list[str] = []
        for name, check in checks:
            try:
                reason = check()
            except Exception as exc:  # a check must never take the endpoint down
                reason = f"check failed: {type(exc).__name__}"
                log.warning(kv("readiness_check_failed", check=name, error=type(exc).__name__))
            if reason is not None:
                reasons.append(f"{name}: {reason}")
        return reasons


def upstream_reachable(addresses: Sequence[HostPort]) -> Check:
    """Ready when a TCP connection to one of ``addresses`` opens within the probe timeout."""

    def check() -> str | None:
        errors: list[str] = []
        for address in addresses:
            try:
                with socket.create_connection(
                    (address.host, address.port), timeout=UPSTREAM_PROBE_TIMEOUT_S
                ):
                    return None
            except OSError as exc:
                errors.append(f"{address} ({exc.strerror or type(exc).__name__})")
        return "no upstream bootstrap server accepts connections: " + ", ".join(errors)

    return check


def workers_ready(endpoints: Callable[[], Mapping[int, str]]) -> Check:
    """An instance is ready when every worker it runs is: ``endpoints()`` maps a worker to
    its private metrics URL, whose ``/readyz`` says."""

    def check() -> str | None:
        urls = dict(endpoints())
        if not urls:
            return "no worker running"
        reasons: list[str] = []
        for index, url in sorted(urls.items()):
            readyz = url.rsplit("/", 1)[0] + READYZ
            try:
                with urllib.request.urlopen(readyz, timeout=UPSTREAM_PROBE_TIMEOUT_S * 2):
                    continue
            except urllib.error.HTTPError as exc:
                body = exc.read().decode(errors="replace").splitlines()[1:]
                reasons.append(f"worker {index}: {'; '.join(body) or exc.reason}")
            except OSError as exc:
                reasons.append(f"worker {index}: no answer ({type(exc).__name__})")
        return "; ".join(reasons) if reasons else None

    return check


def health_app(registry: CollectorRegistry, readiness: Readiness) -> WsgiApp:
    """``/livez`` and ``/readyz`` from ``readiness``; everything else is prometheus_client's."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == LIVEZ:
            return _text(start_response, "200 OK", "ok\n")
        if path == READYZ:
            reasons = readiness.reasons()
            if reasons:
                return _text(start_response, "503 Service Unavailable", _lines(reasons))
            return _text(start_response, "200 OK", "ready\n")
        result: Iterable[bytes] = metrics(environ, start_response)
        return result

    return app


def _lines(reasons: Iterable[str]) -> str:
    return "not ready\n" + "".join(f"{reason}\n" for reason in reasons)


def _text(start_response: StartResponse, status: str, body: str) -> Iterator[bytes]:
    data = body.encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))]
    )
    yield data


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes arrive every few seconds: an access line each would drown the log."""


class HealthServer:
    """``/metrics``, ``/livez`` and ``/readyz`` on one address, served from a thread."""

    def __init__(self, address: HostPort, app: WsgiApp) -> None:
        family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
        server_class = type("_HealthServer", (_Server,), {"address_family": family})
        self._server: WSGIServer = make_server(
            address.host, address.port, app, server_class, handler_class=_Quiet
        )
        self.address = HostPort(address.host, int(self._server.server_address[1]))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="health-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
