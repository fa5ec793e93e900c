"""Fetch: the ``consumer_byte_rate`` quota (spec §3.6, §6.1).

* Request: a consumer fetch's ``max_bytes`` is capped at what the quota allows in one quota
  window (``Q × (quota.window.num − 1) × quota.window.size.seconds``), and ``min_bytes`` at
  that cap; follower fetches (replica id ≥ 0) are exempt from both quotas.
* Response: the size Kafka counts (``4 +`` body size at the response version) is recorded.
  When the request or fetch quota throttles, the bytes are un-recorded and the client gets
  an empty response instead (error NONE, no partitions, the throttle time) whose session id
  keeps the fetch-session semantics of §6.1: 0 for sessionless and full fetches, the
  request's session id for incremental ones. The upstream has already advanced an
  incremental session's epoch, exactly as the client does on receiving the empty response,
  and the client re-fetches the data it did not get from the same offsets. An upstream
  error at the top level is passed on instead (it carries no data).

Fetch v0-3 (removed in Kafka 4.0) are forwarded untouched unless a fetch quota applies to
the client; then v3 is metered by hand and v0-2 are answered UNSUPPORTED_VERSION in their
own shape (see :meth:`FetchQuotaStage._removed`), and ApiVersions does not advertise v0-2.

The final decision is the throttle stage's (:class:`ResponseThrottle`, which records the
size through :func:`quotagate.quota.decide`); this stage only notes the size and prepares the
empty response.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable
from struct import Struct
from typing import Any, ClassVar, Final

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.enforcement.shadow import ShadowQuotas
from quotagate.enforcement.ticket import TICKET_KEY, QuotaTicket
from quotagate.gateway import (
    Exchange,
    Stage,
    log_unsupported_version,
    modelled_request,
    refuse_unmodelled,
)
from quotagate.protocol import api_keys, api_table, removed_versions
from quotagate.protocol.errors import ErrorCode
from quotagate.protocol.headers import HeaderError, response_body_offset
from quotagate.protocol.kio_nested import build
from quotagate.quota import QuotaManagers

_INT16 = Struct(">h")
_INT32_MAX: Final = 2_147_483_647
_FIRST_SESSION_VERSION: Final = 7
_SESSIONLESS_EPOCH: Final = -1
_FULL_EPOCH: Final = 0
_INVALID_SESSION_ID: Final = 0


def kafka_fetch_size(frame: bytes, api_version: int) -> int:
    """``FetchResponse.sizeOf``: 4 + the body size at the response version."""
    try:
        offset = response_body_offset(frame, api_keys.FETCH, api_version)
    except HeaderError:
        return len(frame) - 4
    return len(frame) - offset + 4


class FetchQuotaStage(Stage):
    name: ClassVar[str] = "fetch-quota"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.FETCH})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.FETCH})

    def __init__(
        self,
        ticket: Callable[[Exchange], QuotaTicket],
        managers: QuotaManagers,
        shadow: ShadowQuotas,
    ) -> None:
        self._ticket = ticket
        self._managers = managers
        self._shadow = shadow

    def on_request(self, exchange: Exchange) -> None:
        managers = self._managers
        if not (
            managers.fetch_or_request_enabled
            or self._shadow.active  # a shadow fetch quota must tell follower fetches apart
        ):
            return
        ticket = self._ticket(exchange)
        applies = managers.fetch.quota_applies(ticket.user, ticket.client_id)
        tenants = managers.tenant_level(ticket.tenant)
        if not applies and tenants is not None:
            applies = tenants.fetch.quota_applies(ticket.tenant, "")
        if refuse_unmodelled(exchange, applies):
            return
        if api_table.is_removed(api_keys.FETCH, exchange.api_version):
            if applies:
                self._removed(exchange, ticket)
            return
        request = modelled_request(exchange)
        if request is None:
            return  # not modelled: forwarded untouched, never emptied; malformed: closed
        replica_state = getattr(request, "replica_state", None)
        replica_id = (
            int(replica_state.replica_id) if replica_state is not None else request.replica_id
        )
        if int(replica_id) >= 0:
            ticket.follower_fetch = True
            return
        cap = _fetch_cap(managers, ticket)
        max_bytes = int(request.max_bytes)
        if cap < max_bytes:
            capped = min(int(cap), _INT32_MAX)  # Java's saturating Double.toInt
            exchange.replace_request(
                dataclasses.replace(
                    request, max_bytes=capped, min_bytes=min(int(request.min_bytes), capped)
                )
            )
        if exchange.api_version >= _FIRST_SESSION_VERSION:
            epoch = int(request.session_epoch)
            session = int(request.session_id)
        else:
            epoch, session = _SESSIONLESS_EPOCH, _INVALID_SESSION_ID
        response_session = (
            _INVALID_SESSION_ID if epoch in (_SESSIONLESS_EPOCH, _FULL_EPOCH) else session
        )
        ticket.fetch_empty = functools.partial(_empty_response, exchange, response_session)

    def _removed(self, exchange: Exchange, ticket: QuotaTicket) -> None:
        """Fetch v0-3 under a fetch quota. v3 is metered like the modelled versions (its
        ``max_bytes`` capped, an empty response when throttled); v0-2 are answered
        UNSUPPORTED_VERSION for every partition, in their shape, the connection kept: they
        have no response-level ``max_bytes``, so nothing bounds what one response may carry
        (Kafka applies that cap inside the broker)."""
        header = exchange.header
        request = removed_versions.read_fetch(exchange.request_frame, header)
        if request.replica_id >= 0:
            ticket.follower_fetch = True
            return
        if request.max_bytes < 0:
            ticket.impose_error(ErrorCode.UNSUPPORTED_VERSION)
            log_unsupported_version(exchange, "UNSUPPORTED_VERSION")
            exchange.respond_frame(
                removed_versions.fetch_error_response(
                    header.correlation_id,
                    header.api_version,
                    request,
                    ErrorCode.UNSUPPORTED_VERSION,
                )
            )
            return
        cap = _fetch_cap(self._managers, ticket)
        if cap < request.max_bytes:
            capped = min(int(cap), _INT32_MAX)
            exchange.replace_request_frame(
                removed_versions.fetch_capped(
                    exchange.request_frame, header, capped, min(request.min_bytes, capped)
                )
            )
        ticket.fetch_empty = functools.partial(_empty_removed, exchange)

    def on_response(self, exchange: Exchange) -> None:
        frame = exchange.response_frame
        ticket = exchange.get(TICKET_KEY)
        if frame is None or ticket is None or ticket.follower_fetch:
            return
        ticket.fetch_bytes = kafka_fetch_size(frame, exchange.api_version)


def _fetch_cap(managers: QuotaManagers, ticket: QuotaTicket) -> float:
    """Kafka's cap on a consumer fetch (one quota window's worth), the lower of both levels."""
    cap = managers.fetch.max_value_in_quota_window(ticket.user, ticket.client_id)
    tenants = managers.tenant_level(ticket.tenant)
    if tenants is not None:
        cap = min(cap, tenants.fetch.max_value_in_quota_window(ticket.tenant, ""))
    return cap


def _empty_removed(exchange: Exchange, throttle_ms: int) -> bytes:
    header = exchange.header
    return removed_versions.fetch_empty_response(
        header.correlation_id, header.api_version, throttle_ms
    )


def _empty_response(exchange: Exchange, session_id: int, throttle_ms: int) -> Any:
    """The response a broker sends for a throttled fetch, or None to keep the upstream's."""
    frame = exchange.response_frame
    if frame is None or not api_table.is_modelled(api_keys.FETCH, exchange.api_version):
        return None
    offset = response_body_offset(frame, api_keys.FETCH, exchange.api_version)
    if exchange.api_version >= _FIRST_SESSION_VERSION:
        (error,) = _INT16.unpack_from(frame, offset + 4)
        if error != 0:
            return None
    schema: Any = api_table.response_schema(api_keys.FETCH, exchange.api_version)
    return build(
        schema,
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=KioErrorCode(0),
        session_id=session_id,
        responses=(),
    )
