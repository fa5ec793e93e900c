"""Gateway configuration: a TOML file with Kafka's property names where Kafka has one.

Keys may be written dotted (``socket.request.max.bytes = 104857600``, which TOML reads as
nested tables) or quoted; both end up as the same flat key. Every mistake is reported as a
:class:`ConfigError` whose message says what is wrong and how to fix it.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from quotagate.gateway.auth.authenticator import (
    SASL_MECHANISMS,
    SUPPORTED_SASL_MECHANISMS,
    SecurityProtocol,
)
from quotagate.gateway.upstream_security import (
    PLAINTEXT_UPSTREAM,
    SECURITY_KEYS,
    UpstreamSecurity,
    UpstreamSecurityError,
    parse_upstream_security,
)
from quotagate.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.sni_names import SniPattern, SniPatternError
from quotagate.quota.connection_quotas import canonical_ip
from quotagate.security.principal_mapping import DEFAULT_RULES, InvalidRuleError, PrincipalMapper
from quotagate.store.backends import StoreSettings

INT32_MAX: Final = 2_147_483_647
INT64_MAX: Final = 9_223_372_036_854_775_807
DEFAULT_QUEUED_MAX_REQUEST_BYTES: Final = 512 * 1024 * 1024
UNBOUNDED_BYTES: Final = -1
DEFAULT_LISTEN: Final = "127.0.0.1:9192"
SASL_TERMINATE: Final = "terminate"
SASL_PASSTHROUGH: Final = "passthrough"


class ConfigError(ValueError):
    """A configuration mistake, with a message meant for the person who made it."""


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    name: str
    listen: HostPort
    security_protocol: str = SecurityProtocol.PLAINTEXT
    advertised_host: str = ""
    """Host written into metadata for clients; defaults to the listen host."""
    broker_port_start: int = 0
    """Gateway port of the broker with ``broker_node_id_start``; defaults to listen port + 1."""
    broker_node_id_start: int = 0
    broker_port_count: int = 1024
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_client_auth: str = "none"
    """Kafka's ``ssl.client.auth``: none, requested or required client certificates."""
    ssl_ca_location: str | None = None
    """PEM CA certificates that client certificates must chain to (``ssl.client.auth``)."""
    ssl_principal_mapping_rules: str = DEFAULT_RULES
    """Kafka's ``ssl.principal.mapping.rules``: certificate subject DN -> user name."""
    sasl_enabled_mechanisms: tuple[str, ...] = SASL_MECHANISMS
    sasl_mode: str = SASL_TERMINATE
    """``terminate``: the gateway verifies clients (its store, or OAUTHBEARER tokens against a
    JWKS); ``passthrough``: the upstream does, over the client's own upstream connection
    (gateway/auth/inspection.py)."""
    oauthbearer_jwks_endpoint_url: str | None = None
    """Kafka's ``sasl.oauthbearer.jwks.endpoint.url``: the keys OAUTHBEARER tokens are
    verified with (needed when a terminating listener enables OAUTHBEARER)."""
    oauthbearer_jwks_endpoint_refresh_ms: int = 3_600_000
    oauthbearer_jwks_endpoint_retry_backoff_ms: int = 100
    oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = 10_000
    oauthbearer_expected_audience: tuple[str, ...] = ()
    oauthbearer_expected_issuer: str | None = None
    oauthbearer_clock_skew_seconds: int = 30
    oauthbearer_sub_claim_name: str = "sub"
    """The token claim that names the principal, in both modes (terminate: of the validated
    token; passthrough: read from the client's token, which the upstream validates)."""
    oauthbearer_scope_claim_name: str = "scope"
    connections_max_reauth_ms: int = 0
    """Kafka's ``connections.max.reauth.ms`` (KIP-368): the longest session a terminated SASL
    client gets before it must re-authenticate on its connection; 0 never asks it to."""
    max_connections: int = INT32_MAX
    """Kafka's ``listener.name.<name>.max.connections``: the acceptor waits at this many."""
    max_connection_creation_rate: int = INT32_MAX
    """Kafka's ``listener.name.<name>.max.connection.creation.rate`` (connections/s)."""
    # -- deployment behind load balancers and on one port (issue 35) --
    proxy_protocol: str = "none"
    """``required``: every connection starts with a PROXY protocol v1 or v2 header, whose
    client address the connection quotas, limits and usage events see; ``none``: no header."""
    proxy_protocol_timeout_ms: int = 10_000
    """How long a connection may take to send its PROXY header before it is closed."""
    sni_host_pattern: str = ""
    """TLS listeners: serve every broker on the listen port, routed by the client's TLS
    server name; the pattern names broker ``n`` with ``$(nodeId)`` (``broker-$(nodeId).
    kafka.example.com``) and is advertised in metadata. Empty: one port per broker."""
    sni_bootstrap_host: str = ""
    """The server name of the bootstrap (any name not matching the pattern also is)."""

    def port_for_node(self, node_id: int) -> int | None:
        """The gateway port standing for upstream broker ``node_id``, None outside the range."""
        index = node_id - self.broker_node_id_start
        if 0 <= index < self.broker_port_count:
            return self.broker_port_start + index
        return None


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


# -- value parsers: each returns the value or raises ConfigError(reason, how to fix) ----------


def integer(minimum: int, maximum: int = INT32_MAX) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"{key} = {value!r} is not an integer; write a whole number, "
                f"e.g. {key} = {max(minimum, 1)}"
            )
        if not minimum <= value <= maximum:
            raise ConfigError(
                f"{key} = {value} is out of range; it must be between {minimum} and {maximum}"
            )
        return int(value)

    return parse


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


def _str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f'{key} = {value!r} must be a non-empty string, e.g. {key} = "name"')
    return value


def _instance_id(key: str, value: Any) -> str:
    """A literal, or ``${env:NAME}``: each replica of one configuration (a Kubernetes pod
    named by its StatefulSet) needs an id of its own in its fleet."""
    text = _str(key, value)
    if not (text.startswith("${env:") and text.endswith("}")):
        return text
    name = text[len("${env:") : -1]
    resolved = os.environ.get(name, "")
    if not resolved:
        raise ConfigError(
            f"{key} = {text}: the environment variable {name} is not set or empty; set it "
            "(in Kubernetes, from metadata.name through the downward API) or write the id"
        )
    return resolved


def parse_host_port(key: str, value: Any) -> HostPort:
    example = f'{key} = "127.0.0.1:9092"'
    if not isinstance(value, str):
        raise ConfigError(f"{key} = {value!r} must be a HOST:PORT string, e.g. {example}")
    try:
        return HostPort.parse(value)
    except ValueError:
        raise ConfigError(
            f"{key} = {value!r} is not HOST:PORT (port 0-65535); e.g. {example}"
        ) from None


def _host_ports(key: str, value: Any) -> tuple[HostPort, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value:
        raise ConfigError(f'{key} must list at least one HOST:PORT, e.g. {key} = "127.0.0.1:9092"')
    return tuple(parse_host_port(key, item) for item in value)


def _choice(*choices: str) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"{key} = {value!r} is not one of {', '.join(choices)}")
        return str(value)

    return parse


def _sasl_mechanisms(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value:
        raise ConfigError(f'{key} must list at least one mechanism, e.g. {key} = ["SCRAM-SHA-512"]')
    for item in value:
        if item not in SUPPORTED_SASL_MECHANISMS:
            raise ConfigError(
                f"{key}: {item!r} is not supported; choose from "
                f"{', '.join(SUPPORTED_SASL_MECHANISMS)}"
            )
    return tuple(dict.fromkeys(value))


def _url(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://", "file:")):
        raise ConfigError(
            f"{key} = {value!r} must be an https://, http:// or file: URL, e.g. "
            f'{key} = "https://idp.example.com/.well-known/jwks.json"'
        )
    return value


def _strings(key: str, value: Any) -> tuple[str, ...]:
    """Kafka's comma-separated list, or a TOML array of strings."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(f'{key} = {value!r} must list strings, e.g. {key} = ["kafka"]')
    return tuple(value)


def _mapping_rules(key: str, value: Any) -> str:
    """Kafka's ``ssl.principal.mapping.rules``, refused here as Kafka refuses it at start."""
    if not isinstance(value, str):
        raise ConfigError(
            f"{key} = {value!r} must be a string of comma-separated rules, e.g. "
            f'{key} = "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT"'
        )
    try:
        PrincipalMapper.from_rules(value)
    except InvalidRuleError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return value


def _per_ip_overrides(key: str, value: Any) -> tuple[tuple[str, int], ...]:
    """Kafka's ``"host:count,host:count"`` (the count after the last colon, so IPv6 works), or
    a list of such strings. Addresses only: the gateway does no DNS."""
    example = f'{key} = "10.0.0.1:50,10.0.0.2:200"'
    pairs: list[tuple[str, Any]] = []
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        value = ",".join(value)
    if isinstance(value, str):
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            host, colon, count = item.rpartition(":")
            if not colon:
                raise ConfigError(f"{key}: {item!r} is not ADDRESS:COUNT; write e.g. {example}")
            try:
                pairs.append((host.strip().strip("[]"), int(count.strip())))
            except ValueError:
                raise ConfigError(
                    f"{key}: the count in {item!r} is not a whole number; write e.g. {example}"
                ) from None
    else:
        raise ConfigError(
            f"{key} = {value!r} must be a string of ADDRESS:COUNT pairs; write e.g. {example}"
        )
    result: dict[str, int] = {}
    for host, count in pairs:
        try:
            address = canonical_ip(str(host))
        except ValueError:
            raise ConfigError(
                f"{key}: {host!r} is not an IP address (the gateway does not resolve host "
                f"names, unlike Kafka); write addresses, e.g. {example}"
            ) from None
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= INT32_MAX:
            raise ConfigError(
                f"{key}: the limit for {host} ({count!r}) must be a whole number from 0 to "
                f"{INT32_MAX}"
            )
        result[address] = int(count)
    return tuple(result.items())


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


KeySpec = tuple[str, Callable[[str, Any], Any]]  # (dataclass field, parser)

_GATEWAY_KEYS: Final[dict[str, KeySpec]] = {
    "id": ("gateway_id", _instance_id),
    "workers": ("workers", parse_workers),
    "socket.request.max.bytes": ("socket_request_max_bytes", integer(1)),
    "max.connections": ("max_connections", integer(1)),
    "max.connections.per.ip": ("max_connections_per_ip", integer(0)),
    "max.connections.per.ip.overrides": ("max_connections_per_ip_overrides", _per_ip_overrides),
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
    "bootstrap.servers": ("bootstrap_servers", _host_ports),
}
# Only for "did you mean" and the list of known keys: the values are parsed by
# upstream_security, never here.
_SECURITY_HINTS: Final[dict[str, KeySpec]] = {key: ("", _str) for key in SECURITY_KEYS}
_METRICS_KEYS: Final[dict[str, KeySpec]] = {
    "listen": ("metrics_listen", parse_host_port),
}
_LOG_KEYS: Final[dict[str, KeySpec]] = {
    "level": ("log_level", _choice("DEBUG", "INFO", "WARNING", "ERROR")),
}
_LISTENER_KEYS: Final[dict[str, KeySpec]] = {
    "name": ("name", _str),
    "listen": ("listen", parse_host_port),
    "security.protocol": ("security_protocol", _choice(*SecurityProtocol.ALL)),
    "advertised.host": ("advertised_host", _str),
    "broker.port.start": ("broker_port_start", integer(1, 65535)),
    "broker.node.id.start": ("broker_node_id_start", integer(0)),
    "broker.port.count": ("broker_port_count", integer(1, 65535)),
    "ssl.certificate.location": ("ssl_certificate_location", _str),
    "ssl.key.location": ("ssl_key_location", _str),
    "ssl.client.auth": ("ssl_client_auth", _choice("none", "requested", "required")),
    "ssl.ca.location": ("ssl_ca_location", _str),
    "ssl.principal.mapping.rules": ("ssl_principal_mapping_rules", _mapping_rules),
    "sasl.enabled.mechanisms": ("sasl_enabled_mechanisms", _sasl_mechanisms),
    "sasl.mode": ("sasl_mode", _choice(SASL_TERMINATE, SASL_PASSTHROUGH)),
    "sasl.oauthbearer.jwks.endpoint.url": ("oauthbearer_jwks_endpoint_url", _url),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (
        "oauthbearer_jwks_endpoint_refresh_ms",
        integer(1, INT64_MAX),
    ),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (
        "oauthbearer_jwks_endpoint_retry_backoff_ms",
        integer(0, INT64_MAX),
    ),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (
        "oauthbearer_jwks_endpoint_retry_backoff_max_ms",
        integer(0, INT64_MAX),
    ),
    "sasl.oauthbearer.expected.audience": ("oauthbearer_expected_audience", _strings),
    "sasl.oauthbearer.expected.issuer": ("oauthbearer_expected_issuer", _str),
    "sasl.oauthbearer.clock.skew.seconds": ("oauthbearer_clock_skew_seconds", integer(0)),
    "sasl.oauthbearer.sub.claim.name": ("oauthbearer_sub_claim_name", _str),
    "sasl.oauthbearer.scope.claim.name": ("oauthbearer_scope_claim_name", _str),
    "connections.max.reauth.ms": ("connections_max_reauth_ms", integer(0, INT64_MAX)),
    "max.connections": ("max_connections", integer(1)),
    "max.connection.creation.rate": ("max_connection_creation_rate", integer(1)),
    "proxy.protocol": ("proxy_protocol", _choice("none", "required")),
    "proxy.protocol.timeout.ms": ("proxy_protocol_timeout_ms", integer(1, INT32_MAX)),
    "sni.host.pattern": ("sni_host_pattern", _str),
    "sni.bootstrap.host": ("sni_bootstrap_host", _str),
}
_TERMINATE_ONLY_KEYS: Final = frozenset(
    key
    for key in _LISTENER_KEYS
    if key in ("sasl.enabled.mechanisms", "connections.max.reauth.ms")
    or (key.startswith("sasl.oauthbearer.") and key != "sasl.oauthbearer.sub.claim.name")
)
"""Listener keys a passthrough listener would ignore (the upstream decides what they say)."""
_STORE_KEYS: Final[dict[str, KeySpec]] = {
    "path": ("store_path", _str),
    "backend": ("store_backend", _choice("sqlite", "kafka")),
    "topic": ("store_topic", _str),
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
                f"unknown section [{section}]{_did_you_mean(section, known)}; "
                f"known sections: {', '.join(known)}"
            )
    values: dict[str, Any] = {}
    upstream = document.get("upstream", {})
    if isinstance(upstream, dict):
        # Security keys go to their own parser; bootstrap.servers (and typos) stay here.
        flat = _flatten(upstream)
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
    parsed = tuple(_parse_listener(i, table) for i, table in enumerate(listeners))
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
        bootstrap=",".join(str(address) for address in config.bootstrap_servers),
        client_config=config.upstream_security.librdkafka_config(),
    )


def validate(config: GatewayConfig) -> GatewayConfig:
    """Fill derived defaults and check cross-key rules."""
    listeners = config.listeners or (
        ListenerConfig(name="PLAINTEXT", listen=parse_host_port("listen", DEFAULT_LISTEN)),
    )
    listeners = tuple(_with_listener_defaults(listener) for listener in listeners)
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
        if listener.security_protocol in SecurityProtocol.TLS and not (
            listener.ssl_certificate_location and listener.ssl_key_location
        ):
            raise ConfigError(
                f"listener {listener.name} uses {listener.security_protocol}: set "
                "ssl.certificate.location and ssl.key.location (PEM files)"
            )
        _check_sasl_mode(listener)
        _check_client_certificates(listener)
        _check_oauthbearer(listener)
        _check_sni(listener)
        last = listener.broker_port_start + listener.broker_port_count - 1
        if last > 65535:
            raise ConfigError(
                f"listener {listener.name}: broker ports {listener.broker_port_start}-{last} "
                "go past 65535; lower broker.port.start or broker.port.count"
            )
        if listener.broker_port_start <= listener.listen.port <= last and listener.listen.port:
            raise ConfigError(
                f"listener {listener.name}: listen port {listener.listen.port} falls inside "
                f"its broker port range {listener.broker_port_start}-{last}; move one of them"
            )
    return dataclasses.replace(config, listeners=listeners)


def _check_sni(listener: ListenerConfig) -> None:
    """SNI routing (issue 35) needs TLS, whose handshake carries the name, and a pattern
    that names every broker."""
    if not listener.sni_host_pattern:
        if listener.sni_bootstrap_host:
            raise ConfigError(
                f"listener {listener.name}: sni.bootstrap.host needs sni.host.pattern"
            )
        return
    if listener.security_protocol not in SecurityProtocol.TLS:
        raise ConfigError(
            f"listener {listener.name} uses {listener.security_protocol}: sni.host.pattern "
            'needs security.protocol = "SSL" or "SASL_SSL" (the TLS handshake carries the name)'
        )
    try:
        SniPattern(listener.sni_host_pattern)
    except SniPatternError as exc:
        raise ConfigError(f"listener {listener.name}: {exc}") from None


def _check_client_certificates(listener: ListenerConfig) -> None:
    """mTLS keys only where they act: client certificates on TLS listeners, mapping rules
    where a certificate names the principal (on SASL_SSL the SASL principal wins, as in
    Kafka, so rules there would never apply)."""
    tls = listener.security_protocol in SecurityProtocol.TLS
    if not tls and (listener.ssl_client_auth != "none" or listener.ssl_ca_location):
        raise ConfigError(
            f"listener {listener.name} uses {listener.security_protocol}: ssl.client.auth and "
            'ssl.ca.location need security.protocol = "SSL" or "SASL_SSL"'
        )
    if listener.ssl_client_auth != "none" and not listener.ssl_ca_location:
        raise ConfigError(
            f'listener {listener.name}: ssl.client.auth = "{listener.ssl_client_auth}" '
            "needs ssl.ca.location, the PEM file of the CA certificates client certificates "
            "must chain to"
        )
    if listener.ssl_principal_mapping_rules != DEFAULT_RULES and (
        listener.security_protocol != SecurityProtocol.SSL or listener.ssl_client_auth == "none"
    ):
        raise ConfigError(
            f"listener {listener.name}: ssl.principal.mapping.rules apply to client "
            'certificates on an SSL listener with ssl.client.auth = "requested" or '
            '"required" (on SASL_SSL the SASL principal is used, as in Kafka)'
        )


def _check_sasl_mode(listener: ListenerConfig) -> None:
    if (
        listener.connections_max_reauth_ms
        and listener.security_protocol not in SecurityProtocol.SASL
    ):
        raise ConfigError(
            f"listener {listener.name}: connections.max.reauth.ms asks SASL clients to "
            f"re-authenticate, but security.protocol = {listener.security_protocol!r}; set "
            'security.protocol = "SASL_PLAINTEXT" or "SASL_SSL", or remove the key'
        )
    if listener.sasl_mode != SASL_PASSTHROUGH:
        return
    if listener.security_protocol not in SecurityProtocol.SASL:
        raise ConfigError(
            f'listener {listener.name}: sasl.mode = "passthrough" needs a SASL listener, but '
            f"security.protocol = {listener.security_protocol!r}; set security.protocol = "
            '"SASL_PLAINTEXT" or "SASL_SSL", or remove sasl.mode'
        )
    defaults = ListenerConfig(name=listener.name, listen=listener.listen)
    unused = [
        key
        for key, (attribute, _) in _LISTENER_KEYS.items()
        if key in _TERMINATE_ONLY_KEYS
        and getattr(listener, attribute) != getattr(defaults, attribute)
    ]
    if unused:
        raise ConfigError(
            f"listener {listener.name}: {', '.join(unused)} apply only with sasl.mode = "
            '"terminate"; in passthrough the upstream chooses mechanisms and validates tokens '
            "(of the sasl.oauthbearer.* keys only sub.claim.name, the claim naming the "
            "principal, applies): remove them"
        )


def _check_oauthbearer(listener: ListenerConfig) -> None:
    enabled = (
        listener.security_protocol in SecurityProtocol.SASL
        and listener.sasl_mode == SASL_TERMINATE
        and "OAUTHBEARER" in listener.sasl_enabled_mechanisms
    )
    if enabled and not listener.oauthbearer_jwks_endpoint_url:
        raise ConfigError(
            f"listener {listener.name} enables OAUTHBEARER: set "
            "sasl.oauthbearer.jwks.endpoint.url, the JWKS whose keys sign the tokens"
        )
    if listener.oauthbearer_jwks_endpoint_url and not enabled:
        raise ConfigError(
            f"listener {listener.name} has sasl.oauthbearer.jwks.endpoint.url but no "
            "OAUTHBEARER: add it to sasl.enabled.mechanisms on a SASL listener, e.g. "
            'sasl.enabled.mechanisms = ["OAUTHBEARER"]'
        )


def _with_listener_defaults(listener: ListenerConfig) -> ListenerConfig:
    advertised = listener.advertised_host or listener.listen.host
    if advertised in ("0.0.0.0", "::"):
        raise ConfigError(
            f"listener {listener.name} listens on {listener.listen.host}, which clients cannot "
            'connect to; set advertised.host, e.g. advertised.host = "gateway.example.com"'
        )
    start = listener.broker_port_start or listener.listen.port + 1
    if listener.listen.port == 0 and not listener.broker_port_start:
        raise ConfigError(
            f"listener {listener.name} listens on port 0: set broker.port.start explicitly"
        )
    return dataclasses.replace(listener, advertised_host=advertised, broker_port_start=start)


def _parse_listener(index: int, table: Any) -> ListenerConfig:
    if not isinstance(table, dict):
        raise ConfigError("listeners must be an array of tables: write [[listeners]] blocks")
    values = parse_section(f"listeners #{index + 1}", table, _LISTENER_KEYS)
    if "listen" not in values:
        raise ConfigError(
            f'[[listeners]] #{index + 1} has no listen address; add listen = "{DEFAULT_LISTEN}"'
        )
    values.setdefault("name", "PLAINTEXT" if index == 0 else f"LISTENER{index + 1}")
    return ListenerConfig(**values)


def parse_section(name: str, table: Any, keys: Mapping[str, KeySpec]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    parsed: dict[str, Any] = {}
    for key, value in _flatten(table).items():
        spec = keys.get(key)
        if spec is None:
            raise ConfigError(
                f"unknown key {key!r} in [{name}]{_did_you_mean(key, keys)}; "
                f"known keys: {', '.join(keys)}"
            )
        field_name, parser = spec
        parsed[field_name] = parser(key, value)
    return parsed


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{full}."))
        else:
            flat[full] = value
    return flat


def _did_you_mean(word: str, candidates: Any) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""
