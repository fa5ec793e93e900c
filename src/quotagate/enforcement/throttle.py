"""KIP-219 for every request: the last word on throttling, and the usage event.

This stage must come first among the quota stages: it sees every request first (opening the
request's :class:`QuotaTicket` at the moment it was read) and every response last, after
the other quota stages noted their throttles. There it charges the request-time quota, takes
the largest throttle (ties go to the request quota), records it in the winning quota's
throttle-time sensor only, writes it into ``throttle_time_ms`` where the version has the
field, mutes the connection for that long whatever the version, and emits the usage event.
"""

from __future__ import annotations

from typing import ClassVar

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.gateway import ConnectionInfo, Exchange, Stage


class QuotaThrottleStage(Stage):
    name: ClassVar[str] = "quota-throttle"
    request_keys: ClassVar[frozenset[int] | None] = None
    response_keys: ClassVar[frozenset[int] | None] = None

    def __init__(self, runtime: QuotaRuntime) -> None:
        self.runtime = runtime

    def on_request(self, exchange: Exchange) -> None:
        self.runtime.ticket(exchange)

    def on_response(self, exchange: Exchange) -> None:
        self.runtime.finish(exchange, self.runtime.ticket(exchange))

    def on_connection_closed(self, connection: ConnectionInfo) -> None:
        self.runtime.connection_closed(connection.connection_id)
