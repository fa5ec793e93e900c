"""SaslHandshake / SaslAuthenticate on a listener without SASL: ILLEGAL_SASL_STATE.

That is what a Kafka broker answers there; the requests are never forwarded, because the
gateway, not the client, authenticates to the upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.gateway.stages.exchange import Exchange
from quotagate.gateway.stages.stage import Stage
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.errors import ErrorCode

_SASL_KEYS = frozenset({api_keys.SASL_HANDSHAKE, api_keys.SASL_AUTHENTICATE})


def _versions(api_key: int) -> range:
    versions = api_table.modelled_versions(api_key)
    return versions if versions is not None else range(0)


class SaslOnPlaintextStage(Stage):
    name: ClassVar[str] = "sasl-on-plaintext"
    request_keys: ClassVar[frozenset[int] | None] = _SASL_KEYS
    local_apis: ClassVar[Mapping[int, range]] = {key: _versions(key) for key in _SASL_KEYS}

    def on_request(self, exchange: Exchange) -> None:
        if not api_table.is_modelled(exchange.api_key, exchange.api_version):
            exchange.close(f"unsupported version {exchange.api_version} of a SASL request")
            return
        schema: Any = api_table.response_schema(exchange.api_key, exchange.api_version)
        error = KioErrorCode(ErrorCode.ILLEGAL_SASL_STATE)
        if exchange.api_key == api_keys.SASL_HANDSHAKE:
            exchange.respond(schema(error_code=error, mechanisms=()))
            return
        exchange.respond(
            schema(
                error_code=error,
                error_message="SASL is not enabled on this listener",
                auth_bytes=b"",
            )
        )
