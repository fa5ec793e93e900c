"""The gateway: a Kafka-protocol relay that runs requests through a chain of stages.

What a stage or a plug-in may build on is exported here (h11's way: the modules are the
implementation, this surface is the contract): the stage API (:class:`Stage`,
:class:`Plugin`, :class:`Exchange` and its :class:`ConnectionInfo`, the two helpers for
versions the gateway cannot decode), the configuration, the control channel to the upstream,
and the gateway itself. Everything else in this package (connections, listeners, framing
back-pressure, metrics plumbing, built-in stages) is internal.
"""

from quotagate.gateway.background import BackgroundGateway
from quotagate.gateway.chain import StageChain
from quotagate.gateway.config import (
    ConfigError,
    GatewayConfig,
    KeySpec,
    ListenerConfig,
    integer,
    parse_section,
    store_settings,
)
from quotagate.gateway.connection_limits import ConnectionLimits
from quotagate.gateway.control import ControlChannel, build_request
from quotagate.gateway.exchange import ConnectionInfo, Exchange, Outcome, StateKey
from quotagate.gateway.plugin import Plugin
from quotagate.gateway.server import Gateway
from quotagate.gateway.stage import (
    Stage,
    log_unsupported_version,
    modelled_request,
    refuse_unmodelled,
)
from quotagate.gateway.upstream_security import UpstreamSecurity
from quotagate.protocol.host_port import HostPort

__all__ = [
    "BackgroundGateway",
    "ConfigError",
    "ConnectionInfo",
    "ConnectionLimits",
    "ControlChannel",
    "Exchange",
    "Gateway",
    "GatewayConfig",
    "HostPort",
    "KeySpec",
    "ListenerConfig",
    "Outcome",
    "Plugin",
    "Stage",
    "StageChain",
    "StateKey",
    "UpstreamSecurity",
    "build_request",
    "integer",
    "log_unsupported_version",
    "modelled_request",
    "parse_section",
    "refuse_unmodelled",
    "store_settings",
]
