"""One client connection and its upstream connection: the gateway's per-connection state machine.

Requests are read, framed and handed to the stage chain; forwarded ones go upstream as the
original bytes, in order. Responses are matched to requests in order (Kafka answers a
connection's requests in the order it received them) and written back in the order the
client sent the requests, whether they were answered upstream or locally.

Reading from the client pauses for several independent reasons (KIP-219 mute, upstream
back-pressure, upstream still connecting, too many requests in flight, the request-bytes pool
exhausted, shutdown, the upstream re-authenticating); it resumes only when none is left. While
muted, held, at ``queued.max.requests``, shutting down or re-authenticating, frames already
read are not processed either.

When the upstream link renews its SASL session (KIP-368), the connection holds the client's
requests back (the core's REAUTHENTICATING pause) until the link is done: a pause, no reconnect.

Request bytes are accounted in the gateway-wide :class:`MemoryPool`
(``queued.max.request.bytes``): a frame's declared size is reserved when its size prefix is
read, before the frame is buffered, and released when the gateway no longer holds the
request: once its response is handed to the client's transport, or, for a request that gets
no response (Produce with acks=0), once the upstream transport has sent it. Every reservation
left is released when the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final, cast

from quotagate.gateway.auth.authenticator import AuthResult, Refusal
from quotagate.gateway.auth.listener import FORWARD, RAW_TOKEN, Close, ListenerAuthenticator, Step
from quotagate.gateway.auth.mtls import peer_certificate
from quotagate.gateway.config import SASL_PASSTHROUGH, ListenerConfig
from quotagate.gateway.connection_core import (
    ARM_MUTE,
    CLOSE_REFUSED,
    CLOSE_SHUTDOWN,
    CONNECTING,
    MEMORY,
    PAUSE_READING,
    PROCESS,
    REAUTHENTICATE,
    RESUME_READING,
    UPSTREAM_BUSY,
    ConnectionCore,
)
from quotagate.gateway.limits.connections import Slot
from quotagate.gateway.listening.sni import SniRoute
from quotagate.gateway.services import GatewayServices
from quotagate.gateway.stages.exchange import ConnectionInfo, Exchange, Outcome
from quotagate.gateway.upstream.link import (
    AddressPicker,
    UpstreamLink,
    UpstreamUnavailableError,
    relay_buffer_limits,
)
from quotagate.logs import kv
from quotagate.protocol import api_keys
from quotagate.protocol.errors import ProtocolError
from quotagate.protocol.framing import FrameReader
from quotagate.protocol.headers import (
    RequestHeader,
)

log = logging.getLogger(__name__)

_UPSTREAM_MAX_FRAME: Final = 2_147_483_647  # responses come from a broker we trust
# Bound once: an Enum attribute lookup costs ~0.2 µs on CPython 3.11, several per request.
_FORWARD: Final = Outcome.FORWARD
_RESPOND: Final = Outcome.RESPOND
_CLOSE: Final = Outcome.CLOSE


class ClientConnection(asyncio.Protocol):
    def __init__(
        self,
        services: GatewayServices,
        listener: ListenerConfig,
        pick: AddressPicker,
        auth: ListenerAuthenticator,
        slot: Slot | None = None,
    ) -> None:
        """``auth``: how this connection authenticates, as its listener chose.
        ``slot``: this connection's place in the connection quotas, given back on close."""
        self._services = services
        self._auth = auth
        # Constant per listener: read once, so a listener that looks at no request after
        # the connect pays one attribute test per request, not a call.
        self._auth_watches_requests = auth.watches_requests
        self._auth_watches_responses = auth.watches_responses
        self._slot = slot
        self._listener = listener
        self._pick = pick
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._upstream: asyncio.Transport | None = None
        self._link: UpstreamLink | None = None
        config = services.config
        self._pool = services.memory_pool
        self._reader = FrameReader(config.socket_request_max_bytes, self._reserve)
        self._upstream_reader = FrameReader(_UPSTREAM_MAX_FRAME)
        # Ordering, flush order, pause reasons and mute: the rules without the I/O.
        self._core = ConnectionCore(config.queued_max_requests)
        self._reserved = 0  # bytes this connection holds in the pool (core.deferred included)
        self._frame_started = 0.0  # loop time the partial frame began arriving; 0 = none
        self._mute_handle: asyncio.TimerHandle | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self._registered = False
        self._refusal_seen = False
        self._closed = False
        self._processing = False
        self._process_again = False
        self.last_active = self._loop.time()
        """Loop time of the last request read or response written (not of any byte)."""
        self.info = ConnectionInfo(
            connection_id=services.next_connection_id(),
            listener=listener.name,
            security_protocol=listener.security_protocol,
            client_host="",
            client_port=0,
            principal=None,
        )

    # -- lifecycle ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        relay_buffer_limits(self._transport)
        if isinstance(self._pick, SniRoute):
            self._pick.bind(transport)  # its TLS server name picks the upstream broker
        proxied = self._slot.client if self._slot is not None else None
        peer = proxied or transport.get_extra_info("peername") or ("", 0)
        self.info.client_host, self.info.client_port = str(peer[0]), int(peer[1])
        services = self._services
        services.connections.add(self)
        self._registered = True
        services.metrics.connections.labels(self._listener.name).inc()
        services.metrics.connections_accepted.labels(self._listener.name).inc()
        known = self._auth.on_connect(self.info, lambda: peer_certificate(transport))
        if isinstance(known, Close):
            self._close_for(known)
            return
        self.info.principal = known
        log.debug(
            kv("connection_opened", id=self.info.connection_id, client=self.info.client_address)
        )
        self._pause(CONNECTING)
        self._connect_task = self._loop.create_task(self._connect_upstream())

    async def _connect_upstream(self) -> None:
        config = self._services.config
        security = config.upstream_security
        if self._listener.sasl_mode == SASL_PASSTHROUGH:
            security = security.without_sasl()  # the clients authenticate to it themselves
        setup_s = config.socket_connection_setup_timeout_ms / 1000
        link = UpstreamLink(self, security, setup_s, self.info.connection_id)
        budget_s = config.upstream_connect_timeout_ms / 1000
        failures = self._services.metrics.upstream_connect_failures.inc
        try:
            transport = await link.open(self._pick, self._services.health, budget_s, failures)
        except UpstreamUnavailableError as exc:
            self.close(f"upstream unavailable: {exc}", logging.WARNING)
            return
        if self._closed:
            link.close()
            return
        self._upstream = transport
        self._link = link
        self._resume(CONNECTING)
        self._flush()

    # -- upstream re-authentication (KIP-368), run by the link ----------------------------

    def upstream_reauthentication_due(self) -> None:
        self._apply(self._core.begin_reauthentication())

    def upstream_reauthenticated(self) -> None:
        self._apply(self._core.end_reauthentication())

    def upstream_reauthentication_failed(self, reason: str) -> None:
        # The upstream would close anyway: the client reconnects and authenticates afresh.
        self.close(f"upstream re-authentication failed: {reason}", logging.WARNING)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed:
            log.debug(kv("connection_closed_by_client", id=self.info.connection_id))
        self._shutdown_io()
        if self._slot is not None:
            self._slot.release()
        if self._registered:
            self._registered = False
            self._services.connections.discard(self)
            self._services.metrics.connections.labels(self._listener.name).dec()
            self._services.chain.connection_closed(self.info)

    def eof_received(self) -> bool | None:
        if self._reader.buffered:
            self._protocol_error(
                "truncated_frame", f"client closed with {self._reader.buffered} bytes unframed"
            )
        return None

    def close(self, reason: str, level: int = logging.INFO) -> None:
        """Close both halves; pending responses already handed to the transport still go out."""
        if self._closed:
            return
        log.log(
            level,
            kv(
                "connection_closed",
                id=self.info.connection_id,
                client=self.info.client_address,
                listener=self._listener.name,
                reason=reason,
            ),
        )
        label = reason.split(":", maxsplit=1)[0][:40]
        self._services.metrics.connections_closed.labels(label).inc()
        self._shutdown_io()

    def _shutdown_io(self) -> None:
        self._closed = True
        pool = self._pool
        pool.cancel(self)
        if self._reserved:
            reserved, self._reserved = self._reserved, 0
            self._core.take_deferred()
            pool.release(reserved)
        if self._connect_task is not None and not self._connect_task.done():
            self._connect_task.cancel()
        if self._mute_handle is not None:
            self._mute_handle.cancel()
            self._mute_handle = None
        if self._transport is not None:
            self._transport.close()
        if self._link is not None:  # the link holds the upstream transport, if any
            self._link.close()
            self._link = self._upstream = None

    def _close_after_refusal(self) -> None:
        # Kafka's connection.failed.authentication.delay.ms: a refused client is not let go at
        # once. The refusal is already written; closing a moment later also keeps clients that
        # drop bytes arriving together with a TLS close_notify (kafka-python) from missing it.
        # The refusal itself was logged (rate-limited) where it was decided: the close is
        # only worth a line when debugging.
        delay_ms = self._services.config.connection_failed_authentication_delay_ms
        if delay_ms <= 0:
            self.close("authentication failed or refused", logging.DEBUG)
            return
        self._loop.call_later(
            delay_ms / 1000, self.close, "authentication failed or refused", logging.DEBUG
        )

    def begin_drain(self) -> None:
        """Graceful shutdown: read no more requests, close once in-flight ones are answered."""
        self._apply(self._core.begin_drain())

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def inflight(self) -> int:
        return len(self._core.inflight)

    @property
    def reserved(self) -> int:
        """Request bytes this connection holds in the pool."""
        return self._reserved

    def expire(self, now: float, idle_s: float, frame_s: float) -> None:
        """The gateway's periodic sweep: enforce frame.read.timeout.ms and
        connections.max.idle.ms. While the gateway itself is not reading the connection
        (muted, held, waiting for memory or the upstream, ...) neither clock runs against the
        client: both restart when reading resumes."""
        if self._closed:
            return
        if self._core.deferred:
            self._release_sent()
        if self._core.paused:
            return
        started = self._frame_started
        if started and now - started > frame_s:
            reader = self._reader
            declared = reader.admitted or "unknown"
            self.close(
                f"frame.read.timeout.ms exceeded: {reader.buffered} of {declared} bytes "
                f"arrived in {round((now - started) * 1000)} ms",
                logging.WARNING,
            )
        elif not self._core.inflight and now - self.last_active > idle_s:
            self.close("connections.max.idle.ms exceeded")

    # -- client → gateway -----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._core.paused:
            # uvloop starts reading only after connection_made() has returned, so the pause
            # asked for there (CONNECTING) is lost: without this, a connection paused before
            # its first read would go on reading whatever the reason for the pause.
            self._enforce_pause()
        reader = self._reader
        reader.feed(data)
        self._process()
        if not self._frame_started and reader.buffered:
            self._frame_started = self._loop.time()

    def _reserve(self, size: int) -> bool:
        """FrameReader's admit hook: reserve a frame's bytes before buffering it."""
        if self._pool.try_allocate(size):
            self._reserved += size
            return True
        if not self._closed:
            self._pool.wait(self)
            self._pause(MEMORY)
        return False

    def memory_available(self) -> None:
        """The pool has memory again (MemoryWaiter): resume reading and retry."""
        self._resume(MEMORY)

    def _process(self) -> None:
        """Handle the frames read so far, then flush. Flushing may resume processing (a
        request slot freed, a hold ended); that runs here as one more round, not as a
        nested call, so a long run of locally answered requests cannot recurse deeply."""
        if self._processing:
            self._process_again = True
            return
        self._processing = True
        try:
            while self._process_frames():
                self._flush()
                if not self._process_again or self._closed:
                    break
                self._process_again = False
        finally:
            self._processing = False
            self._process_again = False

    def _process_frames(self) -> bool:
        reader = self._reader
        core = self._core
        try:
            while core.may_process and not self._closed:
                frame = reader.next_frame()
                if frame is None:
                    break
                self._on_request(frame)
        except ProtocolError as exc:
            self._protocol_error(exc.reason, str(exc))
            return False
        except Exception as exc:  # a failing stage must not take the gateway down
            log.exception(kv("stage_failed", id=self.info.connection_id, error=exc))
            self.close(f"internal error: {exc}", logging.ERROR)
            return False
        return True

    def _on_request(self, frame: bytes) -> None:
        watched = self._auth_watches_requests
        chain = self._services.chain
        if watched and self._auth.expects_raw_tokens:
            header = RAW_TOKEN
            exchange = self._open_exchange(header, frame)
        else:
            header = chain.read_header(frame)
            exchange = self._open_exchange(header, frame)
            api = exchange.api_metrics = self._services.metrics.api(header.api_key)
            api.requests += 1
            api.request_bytes += len(frame)
        if watched and header.api_key != api_keys.API_VERSIONS:
            step = self._auth.on_request(header, frame)
            if step is not None:
                self._take(exchange, step)
                return
        chain.run_request_stages(exchange)
        if exchange.hold:
            self._apply(self._core.hold())
        outcome = exchange.outcome
        if outcome is _FORWARD:
            self._forward(exchange)
        elif outcome is _RESPOND:
            self._run_response_stages(exchange, exchange.stages_seen - 1)
        else:
            self.close(exchange.close_reason, logging.WARNING)

    def _open_exchange(self, header: RequestHeader, frame: bytes) -> Exchange:
        exchange = Exchange(
            self.info, header, frame, time.time_ns() // 1_000_000, time.monotonic_ns()
        )
        self._frame_started = 0.0
        actions = self._core.admit(exchange)
        if actions:
            self._apply(actions)
        return exchange

    def _take(self, exchange: Exchange, step: Step) -> None:
        """Do what the authenticator decided for a request."""
        if isinstance(step, AuthResult):
            exchange.respond_frame(step.response)
            self._settle(exchange, step)
        elif step is FORWARD:
            self._forward(exchange)
        elif isinstance(step, Close):
            self._close_for(step)

    def _settle(self, exchange: Exchange, result: AuthResult) -> None:
        if result.refusal is not None:
            self._refused("authentication_failed", result.refusal)
        exchange.done = True
        if result.principal is not None:
            self.info.principal = result.principal
        if result.close:
            exchange.close_after_response = True

    def _close_for(self, step: Close) -> None:
        if step.refusal is not None:
            self._refused(step.event, step.refusal)
        self.close(step.reason, step.level)

    def _forward(self, exchange: Exchange) -> None:
        exchange.forwarded_ns = time.monotonic_ns()
        self._core.forward(exchange)

    # -- upstream → gateway ---------------------------------------------------------------

    def upstream_data(self, data: bytes) -> None:
        reader = self._upstream_reader
        reader.feed(data)
        try:
            while not self._closed:
                frame = reader.next_frame()
                if frame is None:
                    break
                self._on_response(frame)
        except ProtocolError as exc:
            self.close(f"bad upstream response: {exc}", logging.ERROR)
            return
        except Exception as exc:
            log.exception(kv("stage_failed", id=self.info.connection_id, error=exc))
            self.close(f"internal error: {exc}", logging.ERROR)
            return
        self._flush()

    def _on_response(self, frame: bytes) -> None:
        exchange = self._core.receive_response(frame)
        upstream_ns = exchange.upstream_ns = time.monotonic_ns() - exchange.forwarded_ns
        api = exchange.api_metrics
        if api is None:
            api = self._services.metrics.api(exchange.header.api_key)
        api.observe_latency(upstream_ns / 1e9)
        if self._auth_watches_responses:
            result = self._auth.on_response(exchange.header, frame)
            if result is not None:
                self._settle(exchange, result)
                return
        self._run_response_stages(exchange, exchange.stages_seen)

    def _run_response_stages(self, exchange: Exchange, seen: int) -> None:
        if self._services.chain.run_response_stages(exchange, seen) is _CLOSE:
            self.close(exchange.close_reason, logging.ERROR)

    def upstream_lost(self, exc: Exception | None) -> None:
        self._upstream = None
        if not self._closed:
            # Closing the client promptly lets its own retry and metadata logic take over. An
            # upstream that refused a passthrough login closes on its own: the refusal was
            # logged, the close is no news.
            self.close(
                f"upstream connection lost: {exc or 'closed by broker'}",
                logging.DEBUG if self._refusal_seen else logging.WARNING,
            )

    def upstream_pause_writing(self) -> None:
        self._pause(UPSTREAM_BUSY)

    def upstream_resume_writing(self) -> None:
        self._resume(UPSTREAM_BUSY)

    # -- gateway → client and upstream ----------------------------------------------------

    def pause_writing(self) -> None:
        # The client is not reading its responses: stop reading the upstream for it.
        if self._link is not None:
            self._link.hold_reading(True)

    def resume_writing(self) -> None:
        if self._link is not None:
            self._link.hold_reading(False)

    def _flush(self) -> None:
        """Write what the core has ready (answers in client order, requests upstream), give
        answered requests' bytes back to the pool, then do what the flush decided."""
        if self._closed:
            return
        core = self._core
        inflight = core.inflight
        if inflight and inflight[0].done:
            now = self._loop.time()
            actions = core.flush(now)
            out = core.to_client
            if out and self._transport is not None:
                self._transport.writelines(out)
                core.to_client = []
            released = core.take_released()
            if released:
                self._reserved -= released
                self._pool.release(released)
            self.last_active = now
        else:
            actions = core.flush(0.0)
        if core.to_upstream and self._upstream is not None:
            self._upstream.writelines(core.to_upstream)
            core.to_upstream = []
        if core.deferred:
            self._release_sent()
        if actions:
            self._apply(actions)

    def _release_sent(self) -> None:
        """Release answered acks=0 requests once the upstream transport holds no bytes."""
        upstream = self._upstream
        core = self._core
        if upstream is not None and not core.to_upstream and not upstream.get_write_buffer_size():
            deferred = core.take_deferred()
            self._reserved -= deferred
            self._pool.release(deferred)

    # -- carrying out the core's actions --------------------------------------------------

    def _apply(self, actions: int) -> None:
        """Do what the core asked: pause before resume, and a close before anything that
        would read more (a closing connection handles no further frame)."""
        if self._closed:
            return
        transport = self._transport
        if actions & PAUSE_READING and transport is not None:
            transport.pause_reading()
        if actions & ARM_MUTE:
            if self._mute_handle is not None:
                self._mute_handle.cancel()
            self._mute_handle = self._loop.call_at(self._core.mute_until, self._unmute)
        if actions & CLOSE_REFUSED:
            self._close_after_refusal()
            return
        if actions & CLOSE_SHUTDOWN:
            self.close("shutdown", logging.DEBUG)
            return
        if actions & REAUTHENTICATE and self._link is not None:
            self._link.reauthenticate()
        if actions & RESUME_READING and transport is not None:
            transport.resume_reading()
        if actions & PROCESS:
            self._process()
        if actions & RESUME_READING and not self._core.paused and not self._closed:
            # The gateway, not the client, held things up until now: the idle and
            # partial-frame clocks start again from here.
            now = self._loop.time()
            self.last_active = now
            self._frame_started = now if self._reader.buffered else 0.0

    def _unmute(self) -> None:
        self._mute_handle = None
        self._apply(self._core.unmute())

    def _pause(self, reason: int) -> None:
        self._apply(self._core.pause(reason))

    def _enforce_pause(self) -> None:
        transport = self._transport
        if transport is not None and not self._closed and transport.is_reading():
            transport.pause_reading()

    def _resume(self, reason: int) -> None:
        self._apply(self._core.resume(reason))

    # -- errors ---------------------------------------------------------------------------

    def _protocol_error(self, reason: str, detail: str) -> None:
        log.warning(
            kv(
                "protocol_error",
                reason=reason,
                detail=detail,
                id=self.info.connection_id,
                client=self.info.client_address,
                listener=self._listener.name,
            )
        )
        self.close(reason, logging.DEBUG)

    def _refused(self, event: str, refusal: Refusal) -> None:
        self._refusal_seen = True
        info = self.info
        self._services.refusals.refused(
            event, self._listener.name, info.client_host, info.client_port, refusal
        )
