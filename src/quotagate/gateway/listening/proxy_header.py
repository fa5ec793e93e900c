"""Reading a PROXY protocol header off an accepted socket (the parser: protocol/proxy_protocol).

Exactly the header's bytes are read, in the sizes the parser asks for, so the client's own
first byte (a Kafka frame, a TLS ClientHello) stays in the socket for the connection that
follows. A listener that expects the header refuses, with one structured log line, a
connection that sends anything else, too much, or nothing in time.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Final

from quotagate.logs import kv
from quotagate.protocol.proxy_protocol import ProxyHeader, ProxyHeaderError, parse

log = logging.getLogger(__name__)

MAX_PENDING: Final = 1024
"""Connections one listener holds while their headers arrive: beyond, new ones are refused
at once (they hold no connection slot yet, so nothing else bounds them)."""


class ProxyHeaderRefusedError(Exception):
    """The connection did not start with a valid header in time; the message says why."""


async def read_proxy_header(sock: socket.socket, timeout_s: float) -> ProxyHeader:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout_s):
            data = b""
            while True:
                result = parse(data)
                if isinstance(result, ProxyHeader):
                    return result
                chunk = await loop.sock_recv(sock, result)
                if not chunk:
                    raise ProxyHeaderRefusedError("connection closed before a whole PROXY header")
                data += chunk
    except TimeoutError:
        raise ProxyHeaderRefusedError(f"no whole PROXY header within {timeout_s:g} s") from None
    except ProxyHeaderError as exc:
        raise ProxyHeaderRefusedError(str(exc)) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ProxyHeaderRefusedError(f"connection failed: {reason}") from None


def log_refused(listener: str, peer: str, port: int, reason: str) -> None:
    log.warning(
        kv("proxy_header_refused", listener=listener, peer=peer, peer_port=port, reason=reason)
    )
