"""Rewrite broker addresses in responses so clients only ever connect to the gateway."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from quotagate.gateway.stages.exchange import Exchange
from quotagate.gateway.stages.stage import Stage
from quotagate.protocol.addresses import REWRITTEN_APIS, AddressMapper, rewrite_addresses
from quotagate.protocol.codec import CodecError


class UnmappableBrokerError(Exception):
    """A broker the gateway has no port for."""


class BrokerAddressStage(Stage):
    name: ClassVar[str] = "broker-addresses"
    request_keys: ClassVar[frozenset[int] | None] = REWRITTEN_APIS
    response_keys: ClassVar[frozenset[int] | None] = REWRITTEN_APIS

    def __init__(self, mappers: Mapping[str, AddressMapper] | Callable[[str], AddressMapper]):
        self._mapper_for = mappers if callable(mappers) else mappers.__getitem__

    def on_response(self, exchange: Exchange) -> None:
        if exchange.response_frame is None:
            return
        mapper = self._mapper_for(exchange.connection.listener)
        try:
            response = exchange.response_body()
            rewritten = rewrite_addresses(exchange.api_key, response, mapper)
        except (CodecError, UnmappableBrokerError) as exc:
            # Passing the upstream's addresses on would let the client bypass the gateway.
            exchange.close(f"cannot rewrite broker addresses: {exc}")
            return
        if rewritten is not response:
            exchange.replace_response(rewritten)
