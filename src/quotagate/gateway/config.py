"""Gateway configuration: a TOML file with Kafka's property names where Kafka has one.

Keys may be written dotted (``socket.request.max.bytes = 104857600``, which TOML reads as
nested tables) or quoted; both end up as the same flat key. Every mistake is reported as a
:class:`ConfigError` whose message says what is wrong and how to fix it.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from quotagate.gateway.settings.listeners import (
    DEFAULT_LISTEN,
    SASL_PASSTHROUGH,
    SASL_TERMINATE,
    ListenerConfig,
    check_listener,
    parse_listener,
    with_listener_defaults,
)
from quotagate.gateway.settings.values import (
    INT32_MAX,
    INT64_MAX,
    ConfigError,
    KeySpec,
    choice,
    did_you_mean,
    flatten,
    host_ports,
    integer,
    parse_host_port,
    parse_section,
    per_ip_overrides,
    text,
    text_or_env,
)
from quotagate.gateway.upstream.security import (
    PLAINTEXT_UPSTREAM,
    SECURITY_KEYS,
    UpstreamSecurity,
    UpstreamSecurityError,
    parse_upstream_security,
)
from quotagate.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from quotagate.protocol.host_port import HostPort
from quotagate.store.backends import StoreSettings

# The names the rest of the code and the plug-ins import from here; they live with the
# listener configuration and the value toolkit.
__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_QUEUED_MAX_REQUEST_BYTES",
    "DEFAULT_STORE_TOPIC",
    "INT32_MAX",
    "INT64_MAX",
    "MAX_WORKERS",
    "SASL_PASSTHROUGH",
    "SASL_TERMINATE",
    "UNBOUNDED_BYTES",
    "ConfigError",
    "GatewayConfig",
    "KeySpec",
    "ListenerConfig",
    "integer",
    "load_config",
    "parse_config",
    "parse_host_port",
    "parse_section",
    "parse_workers",
    "store_settings",
    "validate",
    "with_overrides",
]

DEFAULT_QUEUED_MAX_REQUEST_BYTES: Final = 512 * 1024 * 1024
UNBOUNDED_BYTES: Final = -1


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    listeners: tuple[ListenerConfig, ...] = ()
    bootstrap_servers: tuple[HostPort, ...] = ()
    """Upstream cluster; empty means: start an embedded tansu broker."""
    upstream_security: UpstreamSecurity = PLAINTEXT_UPSTREAM
    """TLS and SASL of every connection the gateway opens to the upstream."""
    gateway_id: str = "quotagate"
    workers: int = 1
    """Worker processes sharing every port (SO_REUSEPORT) under one supervisor."""
    socket_request_max_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_connections: int = INT32_MAX
    max_connections_per_ip: int = INT32_MAX
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    """(address, limit) pairs; addresses in canonical form."""
    max_connection_creation_rate: int = INT32_MAX
    connections_max_idle_ms: int = 600_000
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    """Request bytes all connections together may hold (Kafka's MemoryPool); -1 = unbounded."""
    queued_max_requests: int = 500
    """Requests one connection may have in flight before the gateway stops reading it."""
    frame_read_timeout_ms: int = 30_000
    """Time a frame whose first bytes arrived has to arrive whole (gateway-specific)."""
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    socket_connection_setup_timeout_ms: int = 10_000
    upstream_connect_timeout_ms: int = 10_000
    shutdown_timeout_ms: int = 30_000
    connection_failed_authentication_delay_ms: int = 100
    log_refusals_interval_ms: int = 60_000
    """One log line per client address per interval for refused clients (gateway/refusals.py);
    0 logs every refusal."""
    metrics_listen: HostPort | None = None
    log_level: str = "INFO"
    store_path: str = "quotagate.db"
    """SQLite store; relative paths are from the working directory."""
    store_backend: str = "sqlite"
    """``sqlite`` (one process) or ``kafka`` (a compacted topic of the upstream: a fleet)."""
    store_topic: str | None = None
    """Default: what a plug-in's sections name (``Plugin.configure``: a fleet's
    ``_quotagate.<fleet id>.config``), else :data:`DEFAULT_STORE_TOPIC`."""
    store_replication_factor: int = -1
    extra: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Sections owned by other components (e.g. ``[store]``), passed through unparsed."""

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` as Kafka's clients take it: ``host:port,host:port``."""
        return ",".join(str(address) for address in self.bootstrap_servers)


# -- value parsers: each returns the value or raises ConfigError(reason, how to fix) ----------


def _bytes_or_unbounded(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"{key} = {value!r} is not an integer; write a number of bytes, "
            f"e.g. {key} = {DEFAULT_QUEUED_MAX_REQUEST_BYTES}, or -1 for unbounded"
        )
    if value != UNBOUNDED_BYTES and not 1 <= value <= INT64_MAX:
        raise ConfigError(
            f"{key} = {value} is out of range; write -1 (unbounded) or a number of bytes "
            f"of at least socket.request.max.bytes, e.g. {key} = {DEFAULT_QUEUED_MAX_REQUEST_BYTES}"
        )
    return int(value)


MAX_WORKERS: Final = 256


def parse_workers(key: str, value: Any) -> int:
    """A worker count, or ``"auto"``: one per core."""
    if value == "auto":
        return min(os.cpu_count() or 1, MAX_WORKERS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORKERS:
        raise ConfigError(
            f'{key} = {value!r} must be a whole number from 1 to {MAX_WORKERS}, or "auto" '
            f"(one per core, {os.cpu_count() or 1} here)"
        )
    return int(value)


_GATEWAY_KEYS: Final[dict[str, KeySpec]] = {
    "id": ("gateway_id", text_or_env),
    "workers": ("workers", parse_workers),
    "socket.request.max.bytes": ("socket_request_max_bytes", integer(1)),
    "max.connections": ("max_connections", integer(1)),
    "max.connections.per.ip": ("max_connections_per_ip", integer(0)),
    "max.connections.per.ip.overrides": ("max_connections_per_ip_overrides", per_ip_overrides),
    "max.connection.creation.rate": ("max_connection_creation_rate", integer(0)),
    "connections.max.idle.ms": ("connections_max_idle_ms", integer(1)),
    "queued.max.request.bytes": ("queued_max_request_bytes", _bytes_or_unbounded),
    "queued.max.requests": ("queued_max_requests", integer(1)),
    "frame.read.timeout.ms": ("frame_read_timeout_ms", integer(1)),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", integer(0)),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", integer(0)),
    "socket.connection.setup.timeout.ms": ("socket_connection_setup_timeout_ms", integer(1)),
    "upstream.connect.timeout.ms": ("upstream_connect_timeout_ms", integer(0)),
    "shutdown.timeout.ms": ("shutdown_timeout_ms", integer(0)),
    "connection.failed.authentication.delay.ms": (
        "connection_failed_authentication_delay_ms",
        integer(0),
    ),
    "log.refusals.interval.ms": ("log_refusals_interval_ms", integer(0)),
}
_UPSTREAM_KEYS: Final[dict[str, KeySpec]] = {
    "bootstrap.servers": ("bootstrap_servers", host_ports),
}
# Only for "did you mean" and the list of known keys: the values are parsed by
# upstream_security, never here.
_SECURITY_HINTS: Final[dict[str, KeySpec]] = {key: ("", text) for key in SECURITY_KEYS}
_METRICS_KEYS: Final[dict[str, KeySpec]] = {
    "listen": ("metrics_listen", parse_host_port),
}
_LOG_KEYS: Final[dict[str, KeySpec]] = {
    "level": ("log_level", choice("DEBUG", "INFO", "WARNING", "ERROR")),
}
_STORE_KEYS: Final[dict[str, KeySpec]] = {
    "path": ("store_path", text),
    "backend": ("store_backend", choice("sqlite", "kafka")),
    "topic": ("store_topic", text),
    "replication.factor": ("store_replication_factor", integer(-1, 32767)),
}
_SECTIONS: Final = ("gateway", "upstream", "listeners", "metrics", "log", "store")


def load_config(path: Path, plugin_sections: Collection[str] = ()) -> GatewayConfig:
    """``plugin_sections``: the sections the plug-ins declare (``Plugin.sections``), handed
    over whole in ``GatewayConfig.extra``; any other section is refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        hint = ""
        if "Cannot overwrite a value" in str(exc):
            # Bare dotted keys are nested tables: `max.connections = 1` makes
            # `max.connections.per.ip` a key inside a number.
            hint = (
                "; a key that begins with another key (max.connections and "
                "max.connections.per.ip) must be quoted: write "
                '"max.connections.per.ip" = 100'
            )
        raise ConfigError(f"{path} is not valid TOML: {exc}{hint}") from exc
    try:
        return parse_config(document, plugin_sections)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def parse_config(
    document: Mapping[str, Any], plugin_sections: Collection[str] = ()
) -> GatewayConfig:
    known = (*_SECTIONS, *plugin_sections)
    for section in document:
        if section not in known:
            raise ConfigError(
                f"unknown section [{section}]{did_you_mean(section, known)}; "
                f"known sections: {', '.join(known)}"
            )
    values: dict[str, Any] = {}
    upstream = document.get("upstream", {})
    if isinstance(upstream, dict):
        # Security keys go to their own parser; bootstrap.servers (and typos) stay here.
        flat = flatten(upstream)
        security = {k: v for k, v in flat.items() if k in SECURITY_KEYS}
        upstream = {k: v for k, v in flat.items() if k not in SECURITY_KEYS}
        try:
            values["upstream_security"] = parse_upstream_security(security)
        except UpstreamSecurityError as exc:
            raise ConfigError(f"[upstream] {exc}") from None
    for section, keys in (
        ("gateway", _GATEWAY_KEYS),
        ("metrics", _METRICS_KEYS),
        ("log", _LOG_KEYS),
        ("store", _STORE_KEYS),
    ):
        values.update(parse_section(section, document.get(section, {}), keys))
    values.update(parse_section("upstream", upstream, {**_UPSTREAM_KEYS, **_SECURITY_HINTS}))
    listeners = document.get("listeners", [])
    if not isinstance(listeners, list):
        raise ConfigError("listeners must be an array of tables: write [[listeners]] blocks")
    parsed = tuple(parse_listener(i, table) for i, table in enumerate(listeners))
    extra = {name: document[name] for name in plugin_sections if name in document}
    config = GatewayConfig(listeners=parsed, extra=extra, **values)
    return validate(config)


def with_overrides(
    config: GatewayConfig, listen: HostPort | None, upstream: HostPort | None
) -> GatewayConfig:
    """Apply ``--listen`` (first listener's address) and ``--upstream`` (bootstrap.servers)."""
    listeners = config.listeners
    if listen is not None:
        if listeners:
            first = dataclasses.replace(
                listeners[0], listen=listen, broker_port_start=0, advertised_host=""
            )
            listeners = (first, *listeners[1:])
        else:
            listeners = (ListenerConfig(name="PLAINTEXT", listen=listen),)
    servers = config.bootstrap_servers if upstream is None else (upstream,)
    return validate(dataclasses.replace(config, listeners=listeners, bootstrap_servers=servers))


DEFAULT_STORE_TOPIC: Final = "_quotagate.quotagate.config"


def store_settings(config: GatewayConfig) -> StoreSettings:
    """Where this gateway's quotas, thresholds and credentials live."""
    return StoreSettings(
        backend=config.store_backend,
        path=config.store_path,
        topic=config.store_topic or DEFAULT_STORE_TOPIC,
        replication_factor=config.store_replication_factor,
        bootstrap=config.bootstrap,
        client_config=config.upstream_security.librdkafka_config(),
    )


def validate(config: GatewayConfig) -> GatewayConfig:
    """Fill derived defaults and check cross-key rules."""
    listeners = config.listeners or (
        ListenerConfig(name="PLAINTEXT", listen=parse_host_port("listen", DEFAULT_LISTEN)),
    )
    listeners = tuple(with_listener_defaults(listener) for listener in listeners)
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"listener names must be unique, got {names}")
    if config.reconnect_backoff_max_ms < config.reconnect_backoff_ms:
        raise ConfigError(
            f"reconnect.backoff.max.ms ({config.reconnect_backoff_max_ms}) is below "
            f"reconnect.backoff.ms ({config.reconnect_backoff_ms}); raise the maximum"
        )
    if config.store_replication_factor == 0:
        raise ConfigError(
            "[store] replication.factor = 0 is not a replication factor: write -1 (the "
            "upstream's default.replication.factor) or a number of replicas >= 1"
        )
    if config.workers > 1 and config.store_backend != "kafka":
        raise ConfigError(
            f'workers = {config.workers} needs the shared store: set backend = "kafka" in '
            "[store] (every worker then reads the same quotas from the upstream; "
            "`quotagate store migrate` copies a SQLite store there), or run one worker"
        )
    if config.max_connections_per_ip == 0 and not config.max_connections_per_ip_overrides:
        raise ConfigError(
            "max.connections.per.ip = 0 refuses every connection: it may be 0 only with "
            "max.connections.per.ip.overrides naming the addresses allowed in (as in Kafka), "
            'e.g. max.connections.per.ip.overrides = "10.0.0.1:100"; otherwise raise it'
        )
    queued = config.queued_max_request_bytes
    if queued != UNBOUNDED_BYTES and queued < config.socket_request_max_bytes:
        default = ", the default" if queued == DEFAULT_QUEUED_MAX_REQUEST_BYTES else ""
        raise ConfigError(
            f"queued.max.request.bytes ({queued}{default}) is below socket.request.max.bytes "
            f"({config.socket_request_max_bytes}); the pool must hold at least one largest "
            "request (Kafka refuses the same): raise queued.max.request.bytes to at least "
            "socket.request.max.bytes, or set it to -1 (unbounded)"
        )
    for listener in listeners:
        check_listener(listener)
    return dataclasses.replace(config, listeners=listeners)
