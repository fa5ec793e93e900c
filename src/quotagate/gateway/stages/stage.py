"""The request-pipeline stage interface, in the spirit of Kroxylicious filters.

A stage sees every request of the APIs it names (``request_keys``) with its decoded header,
the connection (principal included) and the raw frame, and may:

* do nothing: the request goes on to the next stage, then upstream, byte for byte;
* rewrite it: :meth:`Exchange.replace_request`;
* answer it locally: :meth:`Exchange.respond` (later stages and the upstream never see it);
* close the connection: :meth:`Exchange.close`;
* ask for channel muting: :meth:`Exchange.mute` (KIP-219: the client's socket is not read
  for that long once the response is written);
* stop reading further requests until this one is answered: :meth:`Exchange.hold_reading`
  (a request already known to be throttled, as a broker reads one request at a time).

Responses flow back through the stages that saw the request, in reverse order, for the APIs
a stage names in ``response_keys``; there a stage may read the response
(:meth:`Exchange.response_body`), set ``throttle_time_ms``, replace it, or mute.

Stages run on the event loop and must not block. Bodies are decoded lazily and cached on
the exchange, so a stage that does not ask costs no decoding.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from quotagate.gateway.stages.exchange import ConnectionInfo, Exchange
from quotagate.logs import kv
from quotagate.protocol import api_table
from quotagate.protocol.codec import CodecError

log = logging.getLogger(__name__)


class Stage:
    """Base class: override what you need; the defaults forward everything untouched."""

    name: ClassVar[str] = "stage"
    request_keys: ClassVar[frozenset[int] | None] = None
    """APIs whose requests this stage sees; None means all."""
    response_keys: ClassVar[frozenset[int] | None] = frozenset()
    """APIs whose responses this stage sees; None means all (of those it saw as requests)."""
    local_apis: ClassVar[Mapping[int, range]] = {}
    """APIs this stage answers itself, with the versions it speaks: advertised in ApiVersions
    even when the upstream lacks them."""

    async def start(self) -> None:
        """Called once on the gateway's loop when it starts, before clients connect."""

    async def close(self) -> None:
        """Called once on shutdown, after client connections were drained."""

    def on_request(self, exchange: Exchange) -> None:
        """Called for each request of ``request_keys``, in stage order."""

    def on_response(self, exchange: Exchange) -> None:
        """Called for each response of ``response_keys``, in reverse stage order."""

    def on_connection_closed(self, connection: ConnectionInfo) -> None:
        """Called once when a client connection that was accepted has gone, whoever closed
        it: what a stage keeps per connection can be dropped then."""


def refuse_unmodelled(exchange: Exchange, applies: bool) -> bool:
    """Close the connection if a quota that reads the request ``applies`` to this client and
    the request's version is one the gateway knows nothing of (newer than every version it
    models). Returns True when the connection was closed.

    Forwarding it untouched would let a client skip the quota by picking a version the
    gateway never advertised, and without its schema there is no answer in its shape; a
    broker closes the connection on such a version too. Versions Kafka 4.0 removed are not
    refused here: their stages read them by hand (:mod:`quotagate.protocol.removed_versions`)
    and meter them, or answer UNSUPPORTED_VERSION in their shape.
    """
    if not applies:
        return False
    api_key, api_version = exchange.api_key, exchange.api_version
    if api_table.is_modelled(api_key, api_version) or api_table.is_removed(api_key, api_version):
        return False
    log_unsupported_version(exchange, "connection closed")
    exchange.close(
        f"unsupported {api_table.api_name(api_key)} version {api_version}: "
        "a quota applies and this version cannot be metered"
    )
    return True


def log_unsupported_version(exchange: Exchange, answer: str) -> None:
    """The line naming who sent a version a quota cannot meter, and what they got back."""
    log.warning(
        kv(
            "unsupported_version",
            api=api_table.api_name(exchange.api_key),
            version=exchange.api_version,
            client=exchange.connection.client_address,
            client_id=exchange.header.client_id,
            principal=exchange.principal,
            answer=answer,
        )
    )


def modelled_request(exchange: Exchange) -> Any | None:
    """The decoded request, or None when the stage cannot act on it.

    None for a version the gateway does not model (the stage lets it pass as it is). A
    modelled version whose body does not decode (truncated, trailing bytes, a tagged field
    kio refuses) closes the connection instead: forwarding it untouched would take it past
    the stage's checks, so appending one byte to a request would skip a quota.
    """
    if exchange.header.body_offset < 0 or not api_table.is_modelled(
        exchange.api_key, exchange.api_version
    ):
        return None
    try:
        return exchange.request_body()
    except CodecError as exc:
        exchange.close(f"malformed {api_table.api_name(exchange.api_key)} request: {exc}")
        return None
