"""The configuration toolkit the gateway and its plug-ins share: value parsers that return the
value or raise :class:`ConfigError` saying what is wrong and how to fix it, and
:func:`parse_section`, which reads one TOML table against a table of :data:`KeySpec`.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from quotagate.protocol.host_port import HostPort
from quotagate.quota.connection_quotas import canonical_ip

INT32_MAX: Final = 2_147_483_647

INT64_MAX: Final = 9_223_372_036_854_775_807


class ConfigError(ValueError):
    """A configuration mistake, with a message meant for the person who made it."""


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


def text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f'{key} = {value!r} must be a non-empty string, e.g. {key} = "name"')
    return value


def text_or_env(key: str, value: Any) -> str:
    """A literal, or ``${env:NAME}``: what differs between replicas of one configuration
    (a gateway id, from the pod name a StatefulSet gives) comes from their environment."""
    literal = text(key, value)
    if not (literal.startswith("${env:") and literal.endswith("}")):
        return literal
    name = literal[len("${env:") : -1]
    resolved = os.environ.get(name, "")
    if not resolved:
        raise ConfigError(
            f"{key} = {literal}: the environment variable {name} is not set or empty; set it "
            "(in Kubernetes, from metadata.name through the downward API) or write the value"
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


def host_ports(key: str, value: Any) -> tuple[HostPort, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value:
        raise ConfigError(f'{key} must list at least one HOST:PORT, e.g. {key} = "127.0.0.1:9092"')
    return tuple(parse_host_port(key, item) for item in value)


def choice(*choices: str) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"{key} = {value!r} is not one of {', '.join(choices)}")
        return str(value)

    return parse


def url(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://", "file:")):
        raise ConfigError(
            f"{key} = {value!r} must be an https://, http:// or file: URL, e.g. "
            f'{key} = "https://idp.example.com/.well-known/jwks.json"'
        )
    return value


def strings(key: str, value: Any) -> tuple[str, ...]:
    """Kafka's comma-separated list, or a TOML array of strings."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(f'{key} = {value!r} must list strings, e.g. {key} = ["kafka"]')
    return tuple(value)


KeySpec = tuple[str, Callable[[str, Any], Any]]  # (dataclass field, parser)


def parse_section(name: str, table: Any, keys: Mapping[str, KeySpec]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    parsed: dict[str, Any] = {}
    for key, value in flatten(table).items():
        spec = keys.get(key)
        if spec is None:
            raise ConfigError(
                f"unknown key {key!r} in [{name}]{did_you_mean(key, keys)}; "
                f"known keys: {', '.join(keys)}"
            )
        field_name, parser = spec
        parsed[field_name] = parser(key, value)
    return parsed


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{full}."))
        else:
            flat[full] = value
    return flat


def did_you_mean(word: str, candidates: Any) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


def per_ip_overrides(key: str, value: Any) -> tuple[tuple[str, int], ...]:
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
