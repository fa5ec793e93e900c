"""The gateway: a Kafka-protocol relay that runs requests through a chain of stages.

What a stage or a plug-in may build on is exported here (h11's way: the modules are the
implementation, this surface is the contract): the stage API (:class:`Stage`,
:class:`Plugin`, :class:`Exchange` and its :class:`ConnectionInfo`, the two helpers for
versions the gateway cannot decode), the configuration, the control channel to the upstream,
the gateway itself, and what a process needs to run it (its metrics, the embedded broker for
development, a free port, the startup heap freeze). Authentication has its own face,
:mod:`quotagate.gateway.auth`. Everything else in this package (connections, listeners, framing
back-pressure, metrics plumbing, built-in stages) is internal.
"""

from quotagate.gateway.config import (
    ConfigError,
    GatewayConfig,
    KeySpec,
    ListenerConfig,
    integer,
    load_config,
    parse_host_port,
    parse_section,
    parse_workers,
    store_settings,
    validate,
    with_overrides,
)
from quotagate.gateway.embedded import LOOPBACK, EmbeddedBrokerError, TansuBroker, free_port
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.gateway.health import HealthServer, Readiness, health_app, workers_ready
from quotagate.gateway.heap import freeze_startup_heap
from quotagate.gateway.limits.connections import ConnectionLimits
from quotagate.gateway.metrics import GatewayMetrics
from quotagate.gateway.server import Gateway
from quotagate.gateway.stages.chain import StageChain
from quotagate.gateway.stages.exchange import ConnectionInfo, Exchange, Outcome, StateKey
from quotagate.gateway.stages.plugin import Plugin
from quotagate.gateway.stages.stage import (
    Stage,
    log_unsupported_version,
    modelled_request,
    refuse_unmodelled,
)
from quotagate.gateway.upstream.channel import ControlChannel, build_request
from quotagate.gateway.upstream.sasl import UpstreamAuthenticationError
from quotagate.gateway.upstream.security import (
    SECURITY_KEYS,
    UpstreamSecurity,
    UpstreamSecurityError,
    parse_upstream_security,
)
from quotagate.gateway.upstream.streams import open_streams
from quotagate.protocol.host_port import HostPort

__all__ = [
    "LOOPBACK",
    "SECURITY_KEYS",
    "BackgroundGateway",
    "ConfigError",
    "ConnectionInfo",
    "ConnectionLimits",
    "ControlChannel",
    "EmbeddedBrokerError",
    "Exchange",
    "Gateway",
    "GatewayConfig",
    "GatewayMetrics",
    "HealthServer",
    "HostPort",
    "KeySpec",
    "ListenerConfig",
    "Outcome",
    "Plugin",
    "Readiness",
    "Stage",
    "StageChain",
    "StateKey",
    "TansuBroker",
    "UpstreamAuthenticationError",
    "UpstreamSecurity",
    "UpstreamSecurityError",
    "build_request",
    "free_port",
    "freeze_startup_heap",
    "health_app",
    "integer",
    "load_config",
    "log_unsupported_version",
    "modelled_request",
    "open_streams",
    "parse_host_port",
    "parse_section",
    "parse_upstream_security",
    "parse_workers",
    "refuse_unmodelled",
    "store_settings",
    "validate",
    "with_overrides",
    "workers_ready",
]
