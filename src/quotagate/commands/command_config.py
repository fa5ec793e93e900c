"""``--command-config FILE``: client properties, as ``kafka-configs --command-config`` reads
them, for CLI commands that reach a secured gateway or broker.

Java properties syntax (``key=value`` or ``key: value``, ``#``/``!`` comments). The security
keys are the same as ``[upstream]``'s (security.protocol, ssl.*, sasl.*, with ``${env:…}`` and
``${file:…}`` secrets); ``sasl.jaas.config`` with a PLAIN or SCRAM login module is read for its
username and password, as Kafka's tools write it.
"""

from __future__ import annotations

import asyncio
import re
from functools import partial
from pathlib import Path
from typing import Annotated, Final

import typer

from quotagate.client.config import AdminConfig, parse_bootstrap
from quotagate.client.errors import AuthenticationError
from quotagate.gateway import (
    SECURITY_KEYS,
    UpstreamAuthenticationError,
    UpstreamSecurity,
    UpstreamSecurityError,
    open_streams,
    parse_upstream_security,
)
from quotagate.protocol.host_port import HostPort

_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS: Final = "sasl.jaas.config"
# Client properties that concern nothing the CLI does; accepted so a client.properties file
# written for Kafka's tools works unchanged.
_IGNORED: Final = frozenset({"client.id", "request.timeout.ms", "client.dns.lookup"})


class CommandConfigError(ValueError):
    """The file cannot be used; the message names the line or key and how to fix it."""


def read_properties(text: str) -> dict[str, str]:
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)", line)
        if match is None:
            raise CommandConfigError(f"line {number} is not key=value: {line[:40]!r}")
        properties[match[1]] = match[2].strip()
    return properties


def security_from_properties(properties: dict[str, str]) -> UpstreamSecurity:
    keys = dict(properties)
    jaas = keys.pop(_JAAS, None)
    if jaas is not None:
        options = dict(_JAAS_OPTION.findall(jaas))
        for option in ("username", "password"):
            if option in options:
                keys.setdefault(f"sasl.{option}", options[option])
    unknown = [key for key in keys if key not in SECURITY_KEYS and key not in _IGNORED]
    if unknown:
        raise CommandConfigError(
            f"unknown key(s) {', '.join(unknown)}; supported: {', '.join(SECURITY_KEYS)}, "
            f"{_JAAS} (username and password of a PLAIN or SCRAM login module)"
        )
    try:
        return parse_upstream_security({k: v for k, v in keys.items() if k in SECURITY_KEYS})
    except UpstreamSecurityError as exc:
        raise CommandConfigError(str(exc)) from None


def admin_config(bootstrap_server: str, command_config: Path | None) -> AdminConfig:
    """The admin client's config for ``--bootstrap-server`` and ``--command-config``; usage
    errors become typer's BadParameter (exit 2, with the option named)."""
    try:
        bootstrap = parse_bootstrap(bootstrap_server)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--bootstrap-server") from exc
    if command_config is None:
        return AdminConfig(bootstrap)
    try:
        text = command_config.read_text(encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(
            f"cannot read {command_config}: {exc.strerror}", param_hint="--command-config"
        ) from None
    try:
        security = security_from_properties(read_properties(text))
    except CommandConfigError as exc:
        raise typer.BadParameter(
            f"{command_config}: {exc}", param_hint="--command-config"
        ) from None
    return AdminConfig(bootstrap, connector=partial(_open_streams, security))


async def _open_streams(
    security: UpstreamSecurity, address: HostPort, timeout_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``open_streams``, with a refused login as the client's :class:`AuthenticationError`:
    a wrong password fails the command at once instead of being retried to --timeout-ms."""
    try:
        return await open_streams(security, address, timeout_s)
    except UpstreamAuthenticationError as exc:
        raise AuthenticationError(f"login refused by {address}: {exc}") from None


COMMAND_CONFIG_HELP: Final = (
    "Client properties file (security.protocol, ssl.*, sasl.*), as kafka-configs takes."
)
CommandConfig = Annotated[
    Path | None, typer.Option("--command-config", dir_okay=False, help=COMMAND_CONFIG_HELP)
]
