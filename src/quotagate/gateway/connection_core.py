"""The client connection's state machine without I/O: pause reasons, ordering, flush and mute.

In the manner of h11 and h2, this object owns no socket, task, timer or clock. The caller
(:class:`quotagate.gateway.connection.ClientConnection`) feeds it what happened (a request
admitted, a request forwarded, a response frame from the upstream, a pause reason set or
cleared, time passed for a mute) and carries out what it answers:

* bytes to write, collected in :attr:`to_client` and :attr:`to_upstream` (h2's
  ``data_to_send``), each in the order the client sent its requests;
* an action mask (:data:`PAUSE_READING`, :data:`RESUME_READING`, :data:`PROCESS`,
  :data:`ARM_MUTE`, :data:`CLOSE_REFUSED`, :data:`CLOSE_SHUTDOWN`, :data:`REAUTHENTICATE`)
  from the calls that change what the transport should do;
* request bytes the gateway no longer holds (:attr:`released`), for the memory pool.

Keeping these rules here lets unit tests drive every ordering and pause rule without sockets;
the transports, timers and the memory pool stay with the caller. Actions are small int masks,
not objects, because :meth:`flush` runs on the per-request hot path.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from quotagate.gateway.stages.exchange import Exchange
from quotagate.protocol import api_keys
from quotagate.protocol.headers import HeaderError, response_correlation_id

# Why reading from the client is paused; reading resumes only when none is left.
MUTED: Final = 1  # KIP-219: a throttled response went out, the client waits out its throttle
SHUTDOWN: Final = 2  # draining, or refused and about to close
UPSTREAM_BUSY: Final = 4  # the upstream transport's write buffer is full
CONNECTING: Final = 8  # the upstream connection is not open yet
INFLIGHT_FULL: Final = 16  # queued.max.requests requests are outstanding
HELD: Final = 32  # a throttled request is in flight (Exchange.hold_reading)
MEMORY: Final = 64  # waiting for the request-bytes pool (queued.max.request.bytes)
REAUTHENTICATING: Final = 128  # the upstream connection renews its SASL session (KIP-368)
# Frames already read are not handled either while one of these holds (queued.max.requests
# counts requests, not reads: one read may carry thousands of small ones). Nothing is
# forwarded while the upstream connection re-authenticates: its SASL exchange must be alone
# on the wire, and requests held back here keep their order.
STOP_PROCESSING: Final = MUTED | SHUTDOWN | HELD | INFLIGHT_FULL | REAUTHENTICATING
# Clearing one of these may let frames already read be handled.
RETRY_PROCESSING: Final = STOP_PROCESSING | MEMORY

# What the caller must do, as bits of the int the core returns.
PAUSE_READING: Final = 1  # stop reading the client transport
RESUME_READING: Final = 2  # read the client transport again (no pause reason is left)
PROCESS: Final = 4  # handle frames already read
ARM_MUTE: Final = 8  # (re)arm the unmute timer at :attr:`ConnectionCore.mute_until`
CLOSE_REFUSED: Final = 16  # a close-after-response went out: close (after the refusal delay)
CLOSE_SHUTDOWN: Final = 32  # draining and nothing is in flight: close now
REAUTHENTICATE: Final = 64  # every forwarded request is answered: run the SASL exchange now


class ConnectionCore:
    """One client connection's requests in flight, their responses, and why reading pauses."""

    __slots__ = (
        "_max_inflight",
        "_resume_inflight",
        "awaiting",
        "deferred",
        "draining",
        "held",
        "inflight",
        "mute_until",
        "paused",
        "reauth_waiting",
        "released",
        "sizes",
        "to_client",
        "to_upstream",
    )

    def __init__(self, max_inflight: int) -> None:
        """``max_inflight``: queued.max.requests. Kafka reads one request per connection at a
        time; the gateway pipelines but bounds how many a client may have outstanding, and
        reads again once half of them are answered (so one answer does not toggle reading)."""
        self._max_inflight = max_inflight
        self._resume_inflight = max(max_inflight // 2, 1)
        self.inflight: deque[Exchange] = deque()
        """Admitted requests not yet written back, in client order."""
        self.sizes: deque[int] = deque()
        """The request bytes reserved for each of :attr:`inflight`, same order."""
        self.awaiting: deque[Exchange] = deque()
        """Forwarded requests whose response has not arrived, in the order sent upstream."""
        self.to_client: list[bytes] = []
        self.to_upstream: list[bytes] = []
        self.paused = 0
        self.held = 0
        self.draining = False
        self.mute_until = 0.0
        self.released = 0
        """Request bytes the gateway no longer holds since the caller last took them."""
        self.deferred = 0
        """Bytes of answered acks=0 requests the upstream transport may still be sending."""
        self.reauth_waiting = False
        """A re-authentication waits for the forwarded requests' responses."""

    # -- pause reasons --------------------------------------------------------------------

    def pause(self, reason: int) -> int:
        """Add a pause reason; :data:`PAUSE_READING` when it is the first one."""
        was = self.paused
        self.paused = was | reason
        return 0 if was else PAUSE_READING

    def resume(self, reason: int) -> int:
        """Clear a pause reason: :data:`RESUME_READING` when none is left, :data:`PROCESS`
        when frames already read may now be handled."""
        paused = self.paused
        if not paused & reason:
            return 0
        paused = self.paused = paused & ~reason
        actions = 0 if paused else RESUME_READING
        if reason & RETRY_PROCESSING and not paused & STOP_PROCESSING:
            actions |= PROCESS
        return actions

    @property
    def may_process(self) -> bool:
        """Whether frames already read may be handled now."""
        return not self.paused & STOP_PROCESSING

    def begin_drain(self) -> int:
        """Graceful shutdown: read no more requests; close once in-flight ones are answered."""
        self.draining = True
        actions = self.pause(SHUTDOWN)
        return actions | CLOSE_SHUTDOWN if not self.inflight else actions

    def mute(self, now: float, ms: int, since: float = 0.0) -> int:
        """KIP-219: stop reading until ``since`` (or, if 0.0, ``now``) + ``ms``;
        :data:`ARM_MUTE` when that extends the mute (a shorter one inside a longer one changes
        nothing). A mute whose clock started at the decision and has run out by ``now`` (the
        upstream took longer than the throttle) mutes nothing."""
        until = (since or now) + ms / 1000
        if until <= now:
            return 0
        actions = self.pause(MUTED)
        if until > self.mute_until:
            self.mute_until = until
            actions |= ARM_MUTE
        return actions

    def unmute(self) -> int:
        """The mute timer fired."""
        return self.resume(MUTED)

    def begin_reauthentication(self) -> int:
        """KIP-368: the upstream session must be renewed. Read and forward nothing more;
        :data:`REAUTHENTICATE` as soon as no forwarded request awaits its response (now, or
        from the :meth:`flush` after the last one arrives)."""
        self.reauth_waiting = True
        return self.pause(REAUTHENTICATING) | self._reauth_ready()

    def end_reauthentication(self) -> int:
        """The upstream connection re-authenticated: forward again, in the client's order."""
        return self.resume(REAUTHENTICATING)

    def _reauth_ready(self) -> int:
        if self.reauth_waiting and not self.awaiting:
            self.reauth_waiting = False
            return REAUTHENTICATE
        return 0

    # -- requests -------------------------------------------------------------------------

    def admit(self, exchange: Exchange) -> int:
        """A request read from the client joins the in-flight queue, in client order."""
        self.inflight.append(exchange)
        self.sizes.append(len(exchange.request_frame))
        if len(self.inflight) >= self._max_inflight:
            return self.pause(INFLIGHT_FULL)
        return 0

    def hold(self) -> int:
        """The request just admitted is throttled: read nothing more until it is written."""
        self.held += 1
        return self.pause(HELD)

    def forward(self, exchange: Exchange) -> None:
        """Send ``exchange``'s request upstream, expecting its response unless it gets none."""
        # acks=0 produce requests get no response from the broker: expect none.
        if exchange.header.api_key == api_keys.PRODUCE and exchange.acks == 0:
            exchange.done = True
        else:
            self.awaiting.append(exchange)
        self.to_upstream.append(exchange.request_frame)

    def receive_response(self, frame: bytes) -> Exchange:
        """Match an upstream response to the request it answers. Kafka answers a
        connection's requests in order, so anything else is refused (HeaderError): the
        gateway cannot tell which client request a stray answer belongs to."""
        if not self.awaiting:
            raise HeaderError("upstream sent a response nobody asked for")
        exchange = self.awaiting[0]
        correlation_id = response_correlation_id(frame)
        if correlation_id != exchange.header.correlation_id:
            raise HeaderError(
                f"upstream answered correlation id {correlation_id}, "
                f"expected {exchange.header.correlation_id}"
            )
        self.awaiting.popleft()
        exchange.response_frame = frame
        return exchange

    # -- flush ----------------------------------------------------------------------------

    def flush(self, now: float) -> int:
        """Move the answered requests at the head of the queue to :attr:`to_client`, in client
        order (a later answer waits for every earlier one), and say what follows: a mute, a
        close after a refusal or at the end of a drain, reading again."""
        inflight = self.inflight
        actions = 0
        close_after = False
        if inflight and inflight[0].done:
            out = self.to_client
            sizes = self.sizes
            released = 0
            while inflight and inflight[0].done:
                exchange = inflight.popleft()
                frame = exchange.response_frame
                if frame is not None:
                    released += sizes.popleft()
                    out.append(frame)
                    api = exchange.api_metrics
                    if api is not None:  # a counter on the exchange: no I/O
                        api.response_bytes += len(frame)
                elif exchange.forwarded_ns:
                    self.deferred += sizes.popleft()  # acks=0: maybe still being sent
                else:
                    released += sizes.popleft()
                if exchange.mute_ms:
                    actions |= self.mute(now, exchange.mute_ms, exchange.mute_since)
                if exchange.hold:
                    self.held -= 1
                if exchange.close_after_response:
                    # Nothing after the refusal is answered: the connection closes.
                    close_after = True
                    break
            self.released += released
        if close_after:
            actions |= self.pause(SHUTDOWN) | CLOSE_REFUSED
        elif self.paused & INFLIGHT_FULL and len(inflight) < self._resume_inflight:
            actions |= self.resume(INFLIGHT_FULL)
        elif self.draining and not inflight:
            actions |= CLOSE_SHUTDOWN
        if self.paused & HELD and not self.held:
            actions |= self.resume(HELD)
        if self.reauth_waiting:
            actions |= self._reauth_ready()
        return actions

    def take_released(self) -> int:
        """Request bytes to give back to the pool since the last call."""
        released, self.released = self.released, 0
        return released

    def take_deferred(self) -> int:
        """The acks=0 bytes, once the caller knows the upstream transport sent them."""
        deferred, self.deferred = self.deferred, 0
        return deferred
