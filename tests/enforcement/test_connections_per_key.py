"""Connections per sharing key: the runtime learns a connection's key from its requests and
forgets it when the gateway sees the connection go (the stages' connection-closed hook)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from quotagate.gateway.embedded import TansuBroker
from quotagate.protocol import api_keys

pytestmark = pytest.mark.integration


def test_a_closed_connection_leaves_its_key(
    start_quota_gateway: Callable[..., Any],
    quota_tansu: TansuBroker,
    raw_client: Any,
    wait_for: Callable[..., Any],
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap)
    host, port = gateway.host_port
    with raw_client(host, port, "watched") as first, raw_client(host, port, "watched") as second:
        first.request(api_keys.API_VERSIONS, 2)
        second.request(api_keys.API_VERSIONS, 2)
        wait_for(
            lambda: sorted(gateway.runtime.clients.values()) == [("ANONYMOUS", "watched")] * 2,
            5,
            "both connections known",
        )
        first.close()
        wait_for(lambda: len(gateway.runtime.clients) == 1, 5, "the closed connection forgotten")
    wait_for(lambda: not gateway.runtime.clients, 5, "every connection forgotten")
