"""Broker host names for routing by TLS server name (SNI), pure: a pattern such as
``broker-$(nodeId).kafka.example.com`` names each upstream broker, is what metadata
advertises, and is read back from the server name a client's TLS handshake carries."""

from __future__ import annotations

import re
from typing import Final

NODE_ID: Final = "$(nodeId)"
_LABEL_CHARS: Final = re.compile(r"^[a-z0-9.-]*$")
_MAX_NODE_DIGITS: Final = 10  # a Kafka node id is an int32


class SniPatternError(ValueError):
    """The pattern cannot name brokers; the message says how to write one."""


class SniPattern:
    def __init__(self, pattern: str) -> None:
        text = pattern.strip().lower()
        if text.count(NODE_ID.lower()) != 1:
            raise SniPatternError(
                f"sni.host.pattern {pattern!r} must contain {NODE_ID} exactly once, "
                f"e.g. 'broker-{NODE_ID}.kafka.example.com'"
            )
        prefix, suffix = text.split(NODE_ID.lower())
        if not _LABEL_CHARS.match(prefix + suffix) or "." not in prefix + suffix:
            raise SniPatternError(
                f"sni.host.pattern {pattern!r} must be a DNS name (letters, digits, '-', '.') "
                "with at least one dot around the node id"
            )
        self.pattern = pattern
        self._prefix = prefix
        self._suffix = suffix

    def host(self, node_id: int) -> str:
        """The name broker ``node_id`` is advertised as."""
        return f"{self._prefix}{node_id}{self._suffix}"

    def node_id(self, server_name: str) -> int | None:
        """The broker a server name stands for, None when it names none (the bootstrap)."""
        name = server_name.lower().rstrip(".")
        if not (name.startswith(self._prefix) and name.endswith(self._suffix)):
            return None
        digits = name[len(self._prefix) : len(name) - len(self._suffix)]
        if not digits.isascii() or not digits.isdigit() or len(digits) > _MAX_NODE_DIGITS:
            return None
        if len(digits) > 1 and digits[0] == "0":
            return None  # one name per broker: 'broker-01' is not broker 1
        node = int(digits)
        return node if node <= 2**31 - 1 else None
