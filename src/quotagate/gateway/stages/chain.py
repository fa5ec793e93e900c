"""The ordered stages of a gateway, indexed by API key for a cheap per-request lookup."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from quotagate.gateway.stages.exchange import ConnectionInfo, Exchange, Outcome
from quotagate.gateway.stages.stage import Stage
from quotagate.logs import kv
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.api_support import VersionRange
from quotagate.protocol.headers import HeaderError, RequestHeader, parse_request_header

log = logging.getLogger(__name__)

_ROUTABLE_CACHE: Final = 1024
# Bound once: an Enum attribute lookup costs ~0.2 µs on CPython 3.11, several per request.
_FORWARD: Final = Outcome.FORWARD
_CLOSE: Final = Outcome.CLOSE
# The per-request hot path: the quota stages walk these bodies with bounds-checked hand
# parsers (Produce) or kio behind the bounds walk (Fetch) whenever a quota reads them; the
# bounds walk of every other API costs a few microseconds on requests that are far rarer.
_HAND_PARSED: Final = frozenset({api_keys.PRODUCE, api_keys.FETCH})


class StageChain:
    """Which stages see which API, and which API keys the gateway routes at all."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self._stages = tuple(stages)
        self._by_key: dict[int, tuple[Stage, ...]] = {}
        # Per API key, indexed by how many stages saw the request: the stages to run on its
        # response, in order. Built with the request stages, so a response costs an index.
        self._responders: dict[int, tuple[tuple[Stage, ...], ...]] = {}
        self._upstream_keys: frozenset[int] = frozenset()
        self._routable: dict[int, bool] = {}  # is_routable's answers, until the upstream changes
        self.local_apis: dict[int, range] = {}
        for stage in self._stages:
            self.local_apis.update(stage.local_apis)

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._stages

    def learn_upstream(self, ranges: Iterable[VersionRange]) -> None:
        """Remember which API keys the upstream speaks (from an ApiVersions response)."""
        keys = frozenset(entry.api_key for entry in ranges)
        if keys != self._upstream_keys:
            self._upstream_keys = keys
            self._routable = {}

    def is_routable(self, api_key: int) -> bool:
        """Unknown keys (neither kio nor the upstream knows them) close the connection."""
        routable = self._routable.get(api_key)
        if routable is None:
            routable = (
                api_table.is_known_api(api_key)
                or api_key in self._upstream_keys
                or api_key in self.local_apis
            )
            if len(self._routable) < _ROUTABLE_CACHE:  # clients choose the keys they send
                self._routable[api_key] = routable
        return routable

    def read_header(self, frame: bytes) -> RequestHeader:
        """The header of a request frame the gateway will route; raises ProtocolError for
        an unknown API key or a body whose lengths lie."""
        header = parse_request_header(frame)
        key = header.api_key
        if not self.is_routable(key):
            # Before any metric: each unknown key would add label sets nobody could remove.
            raise HeaderError(f"unknown api key {key}")
        if key not in _HAND_PARSED:
            # A length lie forwarded as it is can take the upstream down (a fuzz case made
            # tansu ask for 206 GB): the gateway refuses it, as Kafka's own parser would.
            codec.check_request(frame, header)
        return header

    def connection_closed(self, info: ConnectionInfo) -> None:
        """Tell every stage; a stage's bookkeeping must not keep the others from theirs."""
        for stage in self._stages:
            try:
                stage.on_connection_closed(info)
            except Exception:
                log.exception(kv("stage_failed", stage=stage.name, hook="connection_closed"))

    def run_request_stages(self, exchange: Exchange) -> None:
        """Hand a request to its stages in order, until one decides other than forwarding."""
        for stage in self.request_stages(exchange.header.api_key):
            exchange.stages_seen += 1
            stage.on_request(exchange)
            if exchange.outcome is not _FORWARD:
                return

    def run_response_stages(self, exchange: Exchange, seen: int) -> Outcome:
        """Hand a response to the stages among the first ``seen`` that asked for it, last
        first; the outcome (CLOSE: close the connection, the exchange unfinished)."""
        for stage in self.response_stages(exchange.header.api_key, seen):
            stage.on_response(exchange)
            if exchange.outcome is _CLOSE:
                return _CLOSE
        exchange.done = True
        return exchange.outcome

    def request_stages(self, api_key: int) -> tuple[Stage, ...]:
        stages = self._by_key.get(api_key)
        if stages is None:
            stages = tuple(
                s for s in self._stages if s.request_keys is None or api_key in s.request_keys
            )
            self._by_key[api_key] = stages
            responders = [
                s for s in stages if s.response_keys is None or api_key in s.response_keys
            ]
            self._responders[api_key] = tuple(
                tuple(s for s in reversed(stages[:seen]) if s in responders)
                for seen in range(len(stages) + 1)
            )
        return stages

    def response_stages(self, api_key: int, seen: int) -> tuple[Stage, ...]:
        """Stages to run on a response, given that the first ``seen`` saw the request."""
        by_seen = self._responders.get(api_key)
        if by_seen is None:
            self.request_stages(api_key)
            by_seen = self._responders[api_key]
        return by_seen[seen]
