"""One TLS port for the bootstrap and every broker, routed by the client's TLS server name.

A listener with ``sni.host.pattern`` opens no port per broker: metadata advertises broker
``n`` as the pattern's name for ``n`` on the listener's own port, and each connection goes to
the upstream broker its server name (SNI) names, or to the bootstrap servers when it names
none. The name is captured during the handshake (the context's SNI callback) and read once
the connection is made, before its upstream connection is opened.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Final

from quotagate.gateway.upstream.brokers import BrokerDirectory
from quotagate.gateway.upstream.link import AddressPicker
from quotagate.logs import kv
from quotagate.protocol.host_port import HostPort
from quotagate.protocol.sni_names import SniPattern

log = logging.getLogger(__name__)

_SERVER_NAME: Final = "quotagate_server_name"


def capture_server_names(context: ssl.SSLContext) -> None:
    """Remember on each TLS connection the server name its client asked for."""

    def callback(connection: object, server_name: str | None, _context: ssl.SSLContext) -> None:
        # The connection is the ssl.SSLObject the transport exposes as 'ssl_object'.
        try:
            setattr(connection, _SERVER_NAME, server_name)
        except AttributeError:
            log.warning(kv("sni_unavailable", reason="cannot record the TLS server name"))

    context.sni_callback = callback


def server_name(transport: asyncio.BaseTransport) -> str | None:
    ssl_object = transport.get_extra_info("ssl_object")
    name = getattr(ssl_object, _SERVER_NAME, None)
    return name if isinstance(name, str) else None


class SniRoute:
    """The upstream address picker of one connection on an SNI listener."""

    __slots__ = ("_bootstrap", "_brokers", "_listener", "_node", "_pattern")

    def __init__(
        self,
        listener: str,
        pattern: SniPattern,
        brokers: BrokerDirectory,
        bootstrap: AddressPicker,
    ) -> None:
        self._listener = listener
        self._pattern = pattern
        self._brokers = brokers
        self._bootstrap = bootstrap
        self._node: int | None = None

    def bind(self, transport: asyncio.BaseTransport) -> None:
        """Read the connection's server name (once its TLS handshake is done)."""
        name = server_name(transport)
        self._node = self._pattern.node_id(name) if name is not None else None
        log.debug(kv("sni_route", listener=self._listener, server_name=name, node_id=self._node))

    def __call__(self, attempt: int) -> HostPort | None:
        if self._node is None:
            return self._bootstrap(attempt)
        return self._brokers.address(self._node)
