"""ApiVersions: advertise only versions both the upstream and the gateway handle."""

from __future__ import annotations

from typing import ClassVar

from quotagate.gateway.stages.chain import StageChain
from quotagate.gateway.stages.exchange import Exchange
from quotagate.gateway.stages.stage import Stage
from quotagate.protocol import api_keys, api_support, api_table
from quotagate.protocol.api_versions_body import parse_api_versions


class ApiVersionsStage(Stage):
    name: ClassVar[str] = "api-versions"
    request_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.API_VERSIONS})
    response_keys: ClassVar[frozenset[int] | None] = frozenset({api_keys.API_VERSIONS})

    def __init__(self) -> None:
        self._chain = StageChain([])
        versions = api_table.modelled_versions(api_keys.API_VERSIONS)
        assert versions is not None
        self._max_version = versions.stop - 1

    def bind(self, chain: StageChain) -> None:
        """The chain whose local APIs to advertise and which learns the upstream's keys."""
        self._chain = chain

    def on_request(self, exchange: Exchange) -> None:
        # Like a broker, answer a version we do not know with a v0 body naming our range,
        # so the client retries with one we do.
        if exchange.api_version > self._max_version:
            exchange.respond(api_support.unsupported_version_response(self._max_version))

    def on_response(self, exchange: Exchange) -> None:
        frame = exchange.response_frame
        if frame is None:
            return
        body = parse_api_versions(frame, exchange.api_version)
        self._chain.learn_upstream(body.ranges)
        negotiated = api_support.negotiate(body.ranges, self._chain.local_apis)
        exchange.replace_response_frame(body.with_ranges(negotiated))
