"""Admin client configuration, with Kafka's property names and defaults (spec §5.6, §7.2)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from quotagate.protocol.host_port import HostPort

INT32_MAX: Final = 2_147_483_647
DEFAULT_RECONNECT_BACKOFF_MS: Final = 50
DEFAULT_RECONNECT_BACKOFF_MAX_MS: Final = 1000


Connector = Callable[
    [HostPort, float], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
]
"""``(address, timeout_s) -> streams``: how to reach a broker (TLS, SASL), when not plain TCP.
Raises ``OSError`` when the broker cannot be reached (retried) and
:class:`quotagate.client.errors.AuthenticationError` when it refuses the login (not retried)."""


def parse_bootstrap(servers: str) -> tuple[HostPort, ...]:
    """``"host:port,host:port"`` (IPv6 hosts in brackets) as addresses."""
    result = [HostPort.parse(item) for item in servers.split(",") if item.strip()]
    if not result:
        raise ValueError("no bootstrap servers given")
    return tuple(result)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """``reconnect_backoff_ms`` / ``reconnect_backoff_max_ms`` left as None mean "not set",
    which matters for the rule of spec §7.2 (see :func:`reconnect_backoff_bounds`)."""

    bootstrap_servers: tuple[HostPort, ...]
    client_id: str = "quotagate-admin"
    request_timeout_ms: int = 30_000
    default_api_timeout_ms: int = 60_000
    retries: int = INT32_MAX
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    reconnect_backoff_ms: int | None = None
    reconnect_backoff_max_ms: int | None = None
    socket_connection_setup_timeout_ms: int = 10_000
    socket_connection_setup_timeout_max_ms: int = 30_000
    connector: Connector | None = field(default=None, repr=False, compare=False)
    """Opens each broker connection (``--command-config``'s TLS and SASL); None: plain TCP."""

    @classmethod
    def of(cls, bootstrap_servers: str, **settings: object) -> AdminConfig:
        return cls(parse_bootstrap(bootstrap_servers), **settings)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        for name in (
            "request_timeout_ms",
            "default_api_timeout_ms",
            "retries",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "socket_connection_setup_timeout_ms",
            "socket_connection_setup_timeout_max_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '.')} must be >= 0")
        for name in ("reconnect_backoff_ms", "reconnect_backoff_max_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name.replace('_', '.')} must be >= 0")
        if not self.bootstrap_servers:
            raise ValueError("bootstrap.servers must name at least one HOST:PORT")


def reconnect_backoff_bounds(config: AdminConfig) -> tuple[int, int]:
    """(``reconnect.backoff.ms``, ``reconnect.backoff.max.ms``) after Kafka's rule: when only
    ``reconnect.backoff.ms`` is set, the maximum becomes that value, so a user who asked for
    a fixed reconnect delay keeps one (``ClientUtils`` / spec §7.2)."""
    initial = config.reconnect_backoff_ms
    maximum = config.reconnect_backoff_max_ms
    if initial is not None and maximum is None:
        return initial, initial
    return (
        DEFAULT_RECONNECT_BACKOFF_MS if initial is None else initial,
        DEFAULT_RECONNECT_BACKOFF_MAX_MS if maximum is None else maximum,
    )
