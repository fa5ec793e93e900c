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

When the upstream gives the gateway's SASL session a lifetime (KIP-368), the connection
re-authenticates its upstream half at 85-95 % of it, as Kafka's clients do: it stops handling
the client's requests (the core's REAUTHENTICATING pause), waits for every forwarded request's
response, runs the SASL exchange again on the same upstream connection, and carries on with
the requests it held back, in order. The client sees a short pause, never a reconnect.

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

from quotagate.gateway.auth.authenticator import (
    ANONYMOUS,
    SASL_PROTOCOL_ERROR,
    AuthContext,
    Authenticator,
    AuthResult,
    Refusal,
    SecurityProtocol,
)
from quotagate.gateway.auth.inspection import SaslInspector
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
from quotagate.gateway.connection_limits import Slot
from quotagate.gateway.control import ControlChannel, connect_error_text, is_security_failure
from quotagate.gateway.exchange import ConnectionInfo, Exchange, Outcome
from quotagate.gateway.refusals import CERTIFICATE_UNMAPPED
from quotagate.gateway.services import GatewayServices
from quotagate.gateway.sni import SniRoute
from quotagate.gateway.upstream import (
    AddressPicker,
    UpstreamLink,
    UpstreamUnavailableError,
    open_upstream,
    relay_buffer_limits,
)
from quotagate.gateway.upstream_sasl import authenticate, reauthentication_delay_s
from quotagate.logs import kv
from quotagate.protocol import api_keys, codec
from quotagate.protocol.errors import ProtocolError
from quotagate.protocol.framing import FrameReader
from quotagate.protocol.headers import (
    HeaderError,
    RequestHeader,
    parse_request_header,
)
from quotagate.protocol.host_port import HostPort
from quotagate.security.principal import PrincipalBuilder, PrincipalError

log = logging.getLogger(__name__)

_SASL_KEYS: Final = frozenset({api_keys.SASL_HANDSHAKE, api_keys.SASL_AUTHENTICATE})
_UPSTREAM_MAX_FRAME: Final = 2_147_483_647  # responses come from a broker we trust
# The per-request hot path: the quota stages walk these bodies with bounds-checked hand
# parsers (Produce) or kio behind the bounds walk (Fetch) whenever a quota reads them; the
# bounds walk of every other API costs a few microseconds on requests that are far rarer.
_HAND_PARSED: Final = frozenset({api_keys.PRODUCE, api_keys.FETCH})
_RAW_TOKEN: Final = RequestHeader(-1, 0, 0, None, -1)
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
        slot: Slot | None = None,
        principals: PrincipalBuilder | None = None,
    ) -> None:
        """``slot``: this connection's place in the connection quotas, given back on close.
        ``principals``: on an SSL listener that verifies client certificates, what turns
        the client's certificate into its principal."""
        self._services = services
        self._principals = principals
        self._slot = slot
        self._listener = listener
        self._pick = pick
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._upstream: asyncio.Transport | None = None
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
        self._reauth_handle: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._reauth_channel: ControlChannel | None = None
        """Takes the upstream's bytes while the upstream connection re-authenticates."""
        self._client_blocked = False  # the client's transport is full (pause_writing)
        self._authenticator: Authenticator | None = None
        self._inspector: SaslInspector | None = None
        security = config.upstream_security
        # A passthrough listener's clients authenticate to the upstream themselves.
        self._upstream_security = (
            security.without_sasl() if listener.sasl_mode == SASL_PASSTHROUGH else security
        )
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
        if self._listener.sasl_mode == SASL_PASSTHROUGH:
            self._inspector = SaslInspector(self._listener.oauthbearer_sub_claim_name)
        elif self._listener.security_protocol in SecurityProtocol.SASL:
            factory = services.authenticator_factory
            if factory is None:
                self.close("no authenticator configured for a SASL listener", logging.ERROR)
                return
            self._authenticator = factory(
                AuthContext(
                    self._listener.name,
                    self._listener.security_protocol,
                    self.info.client_host,
                    self.info.client_port,
                )
            )
        elif self._principals is not None:
            if not self._certificate_principal(transport, self._principals):
                return
        else:
            self.info.principal = ANONYMOUS
        log.debug(kv("connection_opened", id=self.info.connection_id, client=self._peer()))
        self._pause(CONNECTING)
        self._connect_task = self._loop.create_task(self._connect_upstream())

    def _certificate_principal(
        self, transport: asyncio.BaseTransport, principals: PrincipalBuilder
    ) -> bool:
        """Name the connection after its client certificate; False when it was refused."""
        try:
            principal = principals.from_certificate(peer_certificate(transport))
        except PrincipalError as exc:
            # Kafka fails the connection's authentication when no rule maps the subject.
            self._refused("certificate_refused", Refusal(CERTIFICATE_UNMAPPED, str(exc)))
            self.close(f"ssl principal: {exc}", logging.DEBUG)
            return False
        self.info.principal = principal
        log.info(
            kv(
                "tls_principal",
                id=self.info.connection_id,
                client=self._peer(),
                listener=self._listener.name,
                principal=principal,
            )
        )
        return True

    async def _connect_upstream(self) -> None:
        config = self._services.config
        try:
            transport, lifetime_ms = await open_upstream(
                self._pick,
                lambda: UpstreamLink(self),
                self._services.health,
                config.socket_connection_setup_timeout_ms / 1000,
                config.upstream_connect_timeout_ms / 1000,
                self._connect_failed,
                self._upstream_security,
            )
        except UpstreamUnavailableError as exc:
            self.close(f"upstream unavailable: {exc}", logging.WARNING)
            return
        if self._closed:
            transport.close()
            return
        self._upstream = transport
        self._schedule_reauthentication(lifetime_ms)
        self._resume(CONNECTING)
        self._flush()

    # -- upstream re-authentication (KIP-368) ---------------------------------------------

    def _schedule_reauthentication(self, lifetime_ms: int) -> None:
        if lifetime_ms > 0 and not self._closed:
            self._reauth_handle = self._loop.call_later(
                reauthentication_delay_s(lifetime_ms), self._reauthentication_due
            )

    def _reauthentication_due(self) -> None:
        self._reauth_handle = None
        self._apply(self._core.begin_reauthentication())

    async def _reauthenticate(self) -> None:
        """Every forwarded request is answered: the SASL exchange has the connection."""
        upstream = self._upstream
        if upstream is None or self._closed:
            return
        channel = self._reauth_channel = ControlChannel.borrow(upstream)
        started = self._loop.time()
        # A client slow to read its responses keeps the upstream paused; the SASL answers
        # are the gateway's own and small: read them anyway.
        upstream.resume_reading()
        timeout_s = self._services.config.socket_connection_setup_timeout_ms / 1000
        try:
            lifetime_ms = await authenticate(channel, self._upstream_security, timeout_s)
        except (OSError, TimeoutError) as exc:
            # An upstream that refuses the renewal will close the connection anyway: close
            # both halves now, so the client reconnects (and authenticates afresh).
            self.close(
                f"upstream re-authentication failed: {connect_error_text(exc)}", logging.WARNING
            )
            return
        finally:
            self._reauth_channel = None
            if self._client_blocked and self._upstream is not None:
                self._upstream.pause_reading()
        log.info(
            kv(
                "upstream_reauthenticated",
                id=self.info.connection_id,
                security=self._upstream_security.describe(),
                took_ms=round((self._loop.time() - started) * 1000),
                session_lifetime_ms=lifetime_ms,
            )
        )
        self._schedule_reauthentication(lifetime_ms)
        self._apply(self._core.end_reauthentication())

    def _connect_failed(
        self, address: HostPort, attempt: int, delay_s: float, exc: BaseException
    ) -> None:
        self._services.metrics.upstream_connect_failures.inc()
        log.log(
            logging.WARNING if is_security_failure(exc) else logging.INFO,
            kv(
                "upstream_connect_failed",
                upstream=address,
                security=self._upstream_security.describe(),
                attempt=attempt,
                retry_in_ms=round(delay_s * 1000),
                error=connect_error_text(exc),
            ),
        )

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
            for stage in self._services.chain.stages:
                try:
                    stage.on_connection_closed(self.info)
                except Exception:
                    # A stage's bookkeeping must not keep the other stages from theirs.
                    log.exception(kv("stage_failed", stage=stage.name, hook="connection_closed"))

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
                client=self._peer(),
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
        if self._reauth_handle is not None:
            self._reauth_handle.cancel()
            self._reauth_handle = None
        if self._reauth_task is not None and not self._reauth_task.done():
            self._reauth_task.cancel()
        if self._mute_handle is not None:
            self._mute_handle.cancel()
            self._mute_handle = None
        if self._transport is not None:
            self._transport.close()
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

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
        authenticator = self._authenticator
        if authenticator is not None and authenticator.expects_raw_tokens:
            exchange = self._admit(_RAW_TOKEN, frame)
            self._apply_auth(exchange, authenticator.handle_token(frame[4:]))
            return
        header = parse_request_header(frame)
        key = header.api_key
        chain = self._services.chain
        if not chain.is_routable(key):
            # Before any metric: each unknown key would add label sets nobody could remove.
            raise HeaderError(f"unknown api key {key}")
        if key not in _HAND_PARSED:
            # A length lie forwarded as it is can take the upstream down (a fuzz case made
            # tansu ask for 206 GB): the gateway refuses it, as Kafka's own parser would.
            codec.check_request(frame, header)
        exchange = self._admit(header, frame)
        api = exchange.api_metrics = self._services.metrics.api(key)
        api.requests += 1
        api.request_bytes += len(frame)
        if authenticator is not None and key != api_keys.API_VERSIONS:
            if self.info.principal is None or key in _SASL_KEYS or authenticator.reauthenticating:
                result = authenticator.handle(
                    key, header.api_version, header.correlation_id, frame[4:]
                )
                self._apply_auth(exchange, result)
                return
            if authenticator.session_expired():
                # KIP-368: Kafka's broker disconnects an expired session on its next request.
                self.close(
                    f"SASL session expired: api_key={key} without re-authentication "
                    f"(connections.max.reauth.ms = {self._listener.connections_max_reauth_ms})",
                    logging.WARNING,
                )
                return
        inspector = self._inspector
        if (
            inspector is not None
            and key != api_keys.API_VERSIONS
            and (self.info.principal is None or key in _SASL_KEYS)
        ):
            self._pass_through(exchange, inspector, header, frame)
            return
        for stage in chain.request_stages(key):
            exchange.stages_seen += 1
            stage.on_request(exchange)
            if exchange.outcome is not _FORWARD:
                break
        if exchange.hold:
            self._apply(self._core.hold())
        outcome = exchange.outcome
        if outcome is _FORWARD:
            self._forward(exchange)
        elif outcome is _RESPOND:
            self._run_response_stages(exchange, exchange.stages_seen - 1)
        else:
            self.close(exchange.close_reason, logging.WARNING)

    def _admit(self, header: RequestHeader, frame: bytes) -> Exchange:
        exchange = Exchange(
            self.info, header, frame, time.time_ns() // 1_000_000, time.monotonic_ns()
        )
        self._frame_started = 0.0
        actions = self._core.admit(exchange)
        if actions:
            self._apply(actions)
        return exchange

    def _apply_auth(self, exchange: Exchange, result: AuthResult) -> None:
        if result.refusal is not None:
            self._refused("authentication_failed", result.refusal)
        exchange.respond_frame(result.response)
        exchange.done = True
        if result.principal is not None:
            self._adopt(result.principal)
        if result.close:
            exchange.close_after_response = True

    def _adopt(self, principal: str) -> None:
        if principal != self.info.principal:
            self.info.principal = principal
            log.info(
                kv(
                    "authenticated",
                    id=self.info.connection_id,
                    client=self._peer(),
                    principal=principal,
                )
            )

    def _pass_through(
        self, exchange: Exchange, inspector: SaslInspector, header: RequestHeader, frame: bytes
    ) -> None:
        """SASL passthrough: the upstream authenticates; the gateway forwards and watches."""
        if header.api_key not in _SASL_KEYS:
            # Kafka closes a connection that sends anything else before authenticating.
            detail = f"api_key={header.api_key} before SASL authentication"
            self._refused("authentication_failed", Refusal(SASL_PROTOCOL_ERROR, detail))
            self.close(detail, logging.DEBUG)
            return
        verdict = inspector.request(header, frame)
        if verdict.close:
            self._refused("authentication_failed", inspector.refusal(verdict))
            self.close(f"SASL passthrough: {verdict.reason}", logging.DEBUG)
            return
        self._forward(exchange)

    def _inspect_response(self, exchange: Exchange, inspector: SaslInspector) -> None:
        header = exchange.header
        frame = exchange.response_frame
        assert frame is not None
        verdict = inspector.response(header.api_key, header.api_version, frame)
        if verdict.principal is not None:
            self._adopt(verdict.principal)
        if verdict.close:
            # The upstream's answer goes to the client as it was sent; then the close.
            self._refused("authentication_failed", inspector.refusal(verdict))
            exchange.close_after_response = True
        exchange.done = True

    def _forward(self, exchange: Exchange) -> None:
        exchange.forwarded_ns = time.monotonic_ns()
        self._core.forward(exchange)

    # -- upstream → gateway ---------------------------------------------------------------

    def upstream_data(self, data: bytes) -> None:
        channel = self._reauth_channel
        if channel is not None:
            # Nothing else is in flight: these bytes answer the SASL exchange.
            channel.data_received(data)
            return
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
        inspector = self._inspector
        if inspector is not None and exchange.header.api_key in _SASL_KEYS:
            self._inspect_response(exchange, inspector)
            return
        self._run_response_stages(exchange, exchange.stages_seen)

    def _run_response_stages(self, exchange: Exchange, seen: int) -> None:
        for stage in self._services.chain.response_stages(exchange.header.api_key, seen):
            stage.on_response(exchange)
            if exchange.outcome is _CLOSE:
                self.close(exchange.close_reason, logging.ERROR)
                return
        exchange.done = True

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
        self._client_blocked = True
        if self._upstream is not None:
            self._upstream.pause_reading()

    def resume_writing(self) -> None:
        self._client_blocked = False
        if self._upstream is not None:
            self._upstream.resume_reading()

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
        if actions & REAUTHENTICATE:
            self._reauth_task = self._loop.create_task(self._reauthenticate())
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
                client=self._peer(),
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

    def _peer(self) -> str:
        return self.info.client_address
