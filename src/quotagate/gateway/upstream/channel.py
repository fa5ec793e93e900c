"""How every upstream connection begins, and the small request/response channel the gateway's
own requests use (start-up discovery of brokers and API versions, the admin client's streams).

:func:`open_secured` is the one place an upstream connection is opened: TCP, then TLS when
``[upstream]`` asks for it, then the gateway's SASL exchange. A client's link, discovery and the
admin streams all start from the :class:`ControlChannel` it returns and take the authenticated
transport over (:meth:`ControlChannel.hand_over`), so no path can skip TLS or SASL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from typing import Any, cast

from quotagate.gateway.upstream.sasl import UpstreamAuthenticationError, authenticate
from quotagate.gateway.upstream.security import (
    PLAINTEXT_UPSTREAM,
    UpstreamSecurity,
    client_ssl_context,
)
from quotagate.protocol import api_table, codec
from quotagate.protocol.framing import FrameReader
from quotagate.protocol.headers import response_correlation_id
from quotagate.protocol.host_port import HostPort


class ControlChannel(asyncio.Protocol):
    def __init__(self) -> None:
        self._reader = FrameReader(2_147_483_647)
        self._pending: dict[int, tuple[asyncio.Future[bytes], int, int]] = {}
        self._next_id = 1
        self._transport: asyncio.Transport | None = None
        self._lost = asyncio.get_running_loop().create_future()
        self.session_lifetime_ms = 0
        """What the upstream's SASL answer said (KIP-368); 0: the session does not expire."""

    @classmethod
    async def open(
        cls,
        address: HostPort,
        timeout_s: float,
        security: UpstreamSecurity = PLAINTEXT_UPSTREAM,
    ) -> ControlChannel:
        """Connect, with TLS and the gateway's SASL as ``security`` says, within ``timeout_s``."""
        return await open_secured(address, security, timeout_s)

    @classmethod
    def borrow(cls, transport: asyncio.Transport) -> ControlChannel:
        """A channel over a transport another protocol owns, fed by that protocol
        (:meth:`data_received`) while it has nothing else in flight: how a client's upstream
        connection re-authenticates (KIP-368). Dropped afterwards, never closed."""
        channel = cls()
        channel.connection_made(transport)
        return channel

    def hand_over(self, protocol: asyncio.Protocol) -> asyncio.Transport:
        """Give the (authenticated) transport to ``protocol``; this channel is done with it.

        The upstream sends nothing unasked, so no byte can be left behind in this channel.
        """
        transport = self._transport
        if transport is None or transport.is_closing():
            raise ConnectionError("the upstream closed the connection after authentication")
        self._transport = None
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        return transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (frame := self._reader.next_frame()) is not None:
            entry = self._pending.pop(response_correlation_id(frame), None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        asked = ", ".join(
            f"{api_table.api_name(api_key)} v{version}"
            for future, api_key, version in self._pending.values()
            if not future.done()
        )
        # exc is None for an orderly close (the peer's FIN): say what went unanswered.
        cause = "the upstream closed the connection" if exc is None else str(exc)
        error: Exception = ConnectionError(
            f"{cause} without answering {asked}" if asked else f"{cause} (control connection)"
        )
        if isinstance(exc, ssl.SSLError):
            # A TLS alert after the handshake (TLS 1.3 refuses a client certificate only then):
            # kept as it is, so that it is reported as a TLS failure, with what to fix.
            error = exc
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def request(self, body: Any, timeout_s: float) -> Any:
        """Send a kio request entity, wait for and decode its response."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("control connection is closed")
        correlation_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        api_key, version = int(body.__api_key__), int(body.__version__)
        self._pending[correlation_id] = (future, api_key, version)
        self._transport.write(codec.encode_request_frame(body, correlation_id, "quotagate"))
        frame = await asyncio.wait_for(future, timeout_s)
        return codec.decode_response(frame, api_key, version)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def open_secured(
    address: HostPort, security: UpstreamSecurity, timeout_s: float
) -> ControlChannel:
    """Open a connection to ``address`` as ``security`` says, within ``timeout_s``: TCP, then
    TLS when asked, then the gateway's SASL exchange when asked; never TLS left out once asked.

    A channel whose SASL exchange fails is closed before the error propagates.
    """
    return await asyncio.wait_for(_open_secured(address, security, timeout_s), timeout_s)


async def _open_secured(
    address: HostPort, security: UpstreamSecurity, timeout_s: float
) -> ControlChannel:
    loop = asyncio.get_running_loop()
    if security.uses_tls:
        try:
            _, channel = await loop.create_connection(
                ControlChannel,
                address.host,
                address.port,
                ssl=client_ssl_context(security),
                server_hostname=address.host,
                ssl_handshake_timeout=timeout_s,
            )
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as exc:
            # The TCP connection was made and dropped mid-handshake: a peer that does not
            # speak TLS (or refuses ours), never a reason to try without it.
            raise UpstreamTlsError(
                f"the upstream closed the connection during the TLS handshake ({exc!r})"
            ) from exc
    else:
        _, channel = await loop.create_connection(ControlChannel, address.host, address.port)
    if security.uses_sasl:
        try:
            channel.session_lifetime_ms = await authenticate(channel, security, timeout_s)
        except BaseException:
            channel.close()
            raise
    return channel


class UpstreamTlsError(ConnectionError):
    """The TLS handshake with the upstream did not complete."""


def is_security_failure(exc: BaseException) -> bool:
    """A TLS or SASL refusal: waiting will not fix it, a person must."""
    return isinstance(
        exc, (ssl.SSLError, ssl.CertificateError, UpstreamTlsError, UpstreamAuthenticationError)
    )


def connect_error_text(exc: BaseException) -> str:
    """A failed upstream connection for a log line, with what to check when it is TLS."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS: {text}; the upstream's certificate is not trusted or does not name the host "
            "(check [upstream] ssl.ca.location and ssl.endpoint.identification.algorithm)"
        )
    reason = str(getattr(exc, "reason", "") or "")
    if isinstance(exc, ssl.SSLError) and any(
        alert in reason for alert in ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA")
    ):
        return (
            f"TLS: {text}; the upstream refused the gateway's own certificate or asked for one "
            "(set [upstream] ssl.certificate.location and ssl.key.location)"
        )
    if isinstance(exc, (ssl.SSLError, UpstreamTlsError)):
        return f"TLS: {text}; does the upstream speak TLS on this port? (security.protocol)"
    if isinstance(exc, UpstreamAuthenticationError):
        return f"SASL: {text}"
    return text


def build_request(api_key: int, api_version: int, **fields: Any) -> Any:
    """A kio request of any version from the fields that version has (others are dropped)."""
    schema: Any = api_table.request_schema(api_key, api_version)
    names = {f.name for f in dataclasses.fields(schema)}
    return schema(**{k: v for k, v in fields.items() if k in names})
