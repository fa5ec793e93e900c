"""One listener's acceptor: takes connections off all its ports, one at a time, as Kafka's
acceptor thread does, and applies the connection quotas to each.

When the listener or gateway creation rate is exceeded, or no connection slot is free
(``max.connections``), the acceptor *waits*: it stops taking connections from every port of
the listener (they queue in the kernel's backlog) until the throttle time has passed and a
slot is free. A connection over its IP's creation rate does not make it wait: that socket is
held unread and closed after its throttle time, and the next connection is taken at once.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Final

from quotagate.gateway.limits.connections import ConnectionLimits, Slot, wall_ms
from quotagate.gateway.listening.proxy_header import (
    MAX_PENDING,
    ProxyHeaderRefusedError,
    log_refused,
    read_proxy_header,
)
from quotagate.gateway.refusals import TLS_HANDSHAKE_FAILED, RefusalLog, tls_refusal
from quotagate.logs import error_text, kv
from quotagate.quota.connection_quotas import AdmissionKind, canonical_ip

log = logging.getLogger(__name__)

ProtocolFactory = Callable[[Slot], asyncio.Protocol]

_ACCEPTS_PER_TURN: Final = 64
"""Connections taken per readiness callback, so that a flood of connects cannot starve the
established connections of the event loop."""
_ACCEPT_RETRY_S: Final = 1.0
"""Pause after an accept error such as EMFILE (asyncio's own choice), instead of spinning."""
_TRANSIENT: Final = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR})
RATE: Final = "max.connection.creation.rate"
COUNT: Final = "max.connections"


class Acceptor:
    def __init__(
        self,
        listener: str,
        limits: ConnectionLimits,
        tls: ssl.SSLContext | None,
        refusals: RefusalLog,
        proxy_timeout_s: float | None = None,
    ) -> None:
        """``proxy_timeout_s``: every connection starts with a PROXY protocol header, read
        within this time; its client address is the one the quotas see (None: no header)."""
        self._listener = listener
        self._proxy_timeout_s = proxy_timeout_s
        self._proxied: deque[tuple[socket.socket, str, ProtocolFactory, int]] = deque()
        self._reading_headers = 0
        self._refusals = refusals
        self._limits = limits
        self._quotas = limits.quotas
        self._metrics = limits.metrics
        self._tls = tls
        self._loop = asyncio.get_running_loop()
        self._servers: dict[socket.socket, ProtocolFactory] = {}
        self._reading = True
        self._closed = False
        self._pending: tuple[socket.socket, str, ProtocolFactory, int] | None = None
        self._resume_at = 0.0
        self._blocked_since = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._wake_scheduled = False
        self._starting: set[asyncio.Task[None]] = set()

    def add(self, server: socket.socket, factory: ProtocolFactory) -> None:
        """Take connections from a listening, non-blocking socket."""
        self._servers[server] = factory
        if self._reading:
            self._loop.add_reader(server, self._readable, server)

    def close(self) -> None:
        """Stop accepting; a connection the acceptor was waiting with is closed."""
        if self._closed:
            return
        self._closed = True
        self._pause_reading()
        for server in self._servers:
            server.close()
        self._servers.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._limits.stop_waiting(self._wake)
        if self._pending is not None:
            self._pending[0].close()
            self._pending = None
        while self._proxied:
            self._proxied.popleft()[0].close()

    # -- accepting -------------------------------------------------------------------------

    def _readable(self, server: socket.socket) -> None:
        factory = self._servers.get(server)
        if factory is None:
            return
        for _ in range(_ACCEPTS_PER_TURN):
            if not self._reading:
                return
            try:
                conn, address = server.accept()
            except OSError as exc:
                if exc.errno not in _TRANSIENT and not isinstance(exc, BlockingIOError):
                    log.warning(kv("accept_failed", listener=self._listener, error=error_text(exc)))
                    self._pause_reading()
                    self._loop.call_later(_ACCEPT_RETRY_S, self._resume_reading)
                return
            conn.setblocking(False)
            if self._proxy_timeout_s is not None:
                self._read_header(conn, canonical_ip(str(address[0])), factory, int(address[1]))
                continue
            self._accept(conn, canonical_ip(str(address[0])), factory, int(address[1]))

    def _accept(self, conn: socket.socket, ip: str, factory: ProtocolFactory, port: int) -> None:
        now_ms = wall_ms()
        throttle_ms = self._quotas.record_connection(self._listener, now_ms)
        if throttle_ms > 0 or not self._quotas.slot_available(self._listener):
            self._wait(conn, ip, factory, port, throttle_ms, RATE if throttle_ms else COUNT)
            return
        self._admit(conn, ip, factory, port)

    def _admit(self, conn: socket.socket, ip: str, factory: ProtocolFactory, port: int) -> None:
        admission = self._quotas.admit(self._listener, ip, wall_ms())
        if admission.kind is AdmissionKind.THROTTLED:
            self._limits.hold(conn, self._listener, ip, admission.throttle_ms)
            return
        if admission.kind is AdmissionKind.REFUSED:
            self._metrics.connections_refused.labels(
                self._listener, self._limits.ip_count_label(ip)
            ).inc()
            log.info(
                kv(
                    "connection_rejected",
                    reason="max.connections.per.ip",
                    limit=admission.limit,
                    client=ip,
                    listener=self._listener,
                )
            )
            self._limits.release(self._listener, ip)
            conn.close()
            return
        slot = Slot(
            self._limits,
            self._listener,
            ip,
            (ip, port) if self._proxy_timeout_s is not None else None,
        )
        task = self._loop.create_task(self._start(conn, factory, slot, ip, port))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _start(
        self, conn: socket.socket, factory: ProtocolFactory, slot: Slot, ip: str, port: int
    ) -> None:
        try:
            await self._loop.connect_accepted_socket(lambda: factory(slot), conn, ssl=self._tls)
        except Exception as exc:  # a failed TLS handshake, a reset before it began, ...
            slot.release()
            conn.close()
            refusal = tls_refusal(exc)
            if refusal is None:
                log.debug(
                    kv("connection_start_failed", listener=self._listener, error=error_text(exc))
                )
            else:
                event = (
                    "tls_handshake_failed"
                    if refusal.reason == TLS_HANDSHAKE_FAILED
                    else ("certificate_refused")
                )
                self._refusals.refused(event, self._listener, ip, port, refusal)

    # -- waiting (Kafka's waitForConnectionSlot) -------------------------------------------

    def _wait(
        self,
        conn: socket.socket,
        ip: str,
        factory: ProtocolFactory,
        port: int,
        throttle_ms: int,
        reason: str,
    ) -> None:
        # The quotas read the wall clock as Kafka's do; the wait itself is timed on the loop's
        # monotonic clock, so a wall-clock step cannot stall the listener.
        self._pending = (conn, ip, factory, port)
        self._resume_at = self._loop.time() + throttle_ms / 1000
        self._blocked_since = time.monotonic()
        self._pause_reading()
        self._metrics.acceptor_waits.labels(self._listener, reason).inc()
        self._limits.wait_for_slot(self._wake)
        if throttle_ms > 0:
            self._timer = self._loop.call_at(self._resume_at, self._timer_fired)

    def _wake(self) -> None:
        # Called from a connection's close: look once the loop is back in the acceptor's hands.
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self._loop.call_soon(self._try_resume)

    def _timer_fired(self) -> None:
        self._timer = None
        self._try_resume()

    def _try_resume(self) -> None:
        self._wake_scheduled = False
        if self._closed or self._pending is None:
            return
        # Whole milliseconds, as Kafka counts the wait: a timer firing within its clock's
        # resolution of the end is the end.
        if self._loop.time() + 0.001 < self._resume_at:
            if self._timer is None:
                self._timer = self._loop.call_at(self._resume_at, self._timer_fired)
            return
        if not self._quotas.slot_available(self._listener):
            return  # woken again when a connection closes
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._limits.stop_waiting(self._wake)
        self._metrics.acceptor_blocked_seconds.labels(self._listener).inc(
            time.monotonic() - self._blocked_since
        )
        conn, ip, factory, port = self._pending
        self._pending = None
        self._admit(conn, ip, factory, port)
        self._resume_reading()
        self._accept_proxied()

    # -- the PROXY protocol (issue 35) -------------------------------------------------------

    def _read_header(
        self, conn: socket.socket, peer: str, factory: ProtocolFactory, port: int
    ) -> None:
        if self._reading_headers >= MAX_PENDING:
            log_refused(self._listener, peer, port, f"over {MAX_PENDING} headers awaited")
            conn.close()
            return
        self._reading_headers += 1
        task = self._loop.create_task(self._header(conn, peer, factory, port))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _header(
        self, conn: socket.socket, peer: str, factory: ProtocolFactory, port: int
    ) -> None:
        assert self._proxy_timeout_s is not None
        try:
            header = await read_proxy_header(conn, self._proxy_timeout_s)
        except ProxyHeaderRefusedError as exc:
            log_refused(self._listener, peer, port, str(exc))
            conn.close()
            return
        finally:
            self._reading_headers -= 1
        if self._closed:
            conn.close()
            return
        # LOCAL and address-less headers come from the balancer itself: its address stands.
        ip, client_port = peer, port
        if header.source is not None:
            ip, client_port = canonical_ip(header.source[0]), header.source[1]
        self._proxied.append((conn, ip, factory, client_port))
        self._accept_proxied()

    def _accept_proxied(self) -> None:
        """Headers complete in any order; they wait while the acceptor waits."""
        while self._proxied and self._pending is None and not self._closed:
            self._accept(*self._proxied.popleft())

    def _pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            for server in self._servers:
                self._loop.remove_reader(server)

    def _resume_reading(self) -> None:
        if self._reading or self._closed or self._pending is not None:
            return
        self._reading = True
        for server in list(self._servers):
            self._loop.add_reader(server, self._readable, server)
