"""A listener's configuration (``[[listeners]]``): its keys, defaults and cross-key rules, the
ones whoever adds a listener mode reads (TLS, client certificates, SASL terminate or
passthrough, OAUTHBEARER).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from quotagate.gateway.settings.values import (
    INT32_MAX,
    INT64_MAX,
    ConfigError,
    KeySpec,
    choice,
    integer,
    parse_host_port,
    parse_section,
    strings,
    text,
    url,
)
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.sni_names import SniPattern, SniPatternError
from quotagate.security.principal_mapping import DEFAULT_RULES, InvalidRuleError, PrincipalMapper
from quotagate.security.protocol import SASL_MECHANISMS, SUPPORTED_SASL_MECHANISMS, SecurityProtocol

DEFAULT_LISTEN: Final = "127.0.0.1:9192"
SASL_TERMINATE: Final = "terminate"
SASL_PASSTHROUGH: Final = "passthrough"


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


LISTENER_KEYS: Final[dict[str, KeySpec]] = {
    "name": ("name", text),
    "listen": ("listen", parse_host_port),
    "security.protocol": ("security_protocol", choice(*SecurityProtocol.ALL)),
    "advertised.host": ("advertised_host", text),
    "broker.port.start": ("broker_port_start", integer(1, 65535)),
    "broker.node.id.start": ("broker_node_id_start", integer(0)),
    "broker.port.count": ("broker_port_count", integer(1, 65535)),
    "ssl.certificate.location": ("ssl_certificate_location", text),
    "ssl.key.location": ("ssl_key_location", text),
    "ssl.client.auth": ("ssl_client_auth", choice("none", "requested", "required")),
    "ssl.ca.location": ("ssl_ca_location", text),
    "ssl.principal.mapping.rules": ("ssl_principal_mapping_rules", _mapping_rules),
    "sasl.enabled.mechanisms": ("sasl_enabled_mechanisms", _sasl_mechanisms),
    "sasl.mode": ("sasl_mode", choice(SASL_TERMINATE, SASL_PASSTHROUGH)),
    "sasl.oauthbearer.jwks.endpoint.url": ("oauthbearer_jwks_endpoint_url", url),
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
    "sasl.oauthbearer.expected.audience": ("oauthbearer_expected_audience", strings),
    "sasl.oauthbearer.expected.issuer": ("oauthbearer_expected_issuer", text),
    "sasl.oauthbearer.clock.skew.seconds": ("oauthbearer_clock_skew_seconds", integer(0)),
    "sasl.oauthbearer.sub.claim.name": ("oauthbearer_sub_claim_name", text),
    "sasl.oauthbearer.scope.claim.name": ("oauthbearer_scope_claim_name", text),
    "connections.max.reauth.ms": ("connections_max_reauth_ms", integer(0, INT64_MAX)),
    "max.connections": ("max_connections", integer(1)),
    "max.connection.creation.rate": ("max_connection_creation_rate", integer(1)),
    "proxy.protocol": ("proxy_protocol", choice("none", "required")),
    "proxy.protocol.timeout.ms": ("proxy_protocol_timeout_ms", integer(1, INT32_MAX)),
    "sni.host.pattern": ("sni_host_pattern", text),
    "sni.bootstrap.host": ("sni_bootstrap_host", text),
}


_TERMINATE_ONLY_KEYS: Final = frozenset(
    key
    for key in LISTENER_KEYS
    if key in ("sasl.enabled.mechanisms", "connections.max.reauth.ms")
    or (key.startswith("sasl.oauthbearer.") and key != "sasl.oauthbearer.sub.claim.name")
)
"""Listener keys a passthrough listener would ignore (the upstream decides what they say)."""


def check_listener(listener: ListenerConfig) -> None:
    """The cross-key rules of one listener (after :func:`with_listener_defaults`)."""
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
        for key, (attribute, _) in LISTENER_KEYS.items()
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


def with_listener_defaults(listener: ListenerConfig) -> ListenerConfig:
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


def parse_listener(index: int, table: Any) -> ListenerConfig:
    if not isinstance(table, dict):
        raise ConfigError("listeners must be an array of tables: write [[listeners]] blocks")
    values = parse_section(f"listeners #{index + 1}", table, LISTENER_KEYS)
    if "listen" not in values:
        raise ConfigError(
            f'[[listeners]] #{index + 1} has no listen address; add listen = "{DEFAULT_LISTEN}"'
        )
    values.setdefault("name", "PLAINTEXT" if index == 0 else f"LISTENER{index + 1}")
    return ListenerConfig(**values)


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
