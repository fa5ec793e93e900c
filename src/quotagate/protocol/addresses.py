"""Broker-address rewriting: responses that tell clients where brokers are.

A client must only ever learn gateway addresses, or it would bypass the gateway on its next
connection. Metadata, FindCoordinator (a single coordinator before v4, a list from v4) and
DescribeCluster carry addresses in versions the gateway advertises. Produce v10+, Fetch
v16+, ShareFetch, ShareAcknowledge and DescribeQuorum v2+ also carry endpoints; the gateway
does not advertise those versions (see :mod:`quotagate.protocol.api_support`), so record
batches never need decoding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from kio.static.primitive import i32

from quotagate.protocol import api_keys

AddressMapper = Callable[[int, str, int], tuple[str, int]]
"""``(node_id, upstream_host, upstream_port) -> (gateway_host, gateway_port)``."""

REWRITTEN_APIS: Final = frozenset(
    {api_keys.METADATA, api_keys.FIND_COORDINATOR, api_keys.DESCRIBE_CLUSTER}
)


def rewrite_addresses(api_key: int, response: Any, mapper: AddressMapper) -> Any:
    """``response`` with every broker address mapped; the same object if none is present."""
    if api_key == api_keys.METADATA:
        return _replace_each(response, "brokers", "node_id", mapper)
    if api_key == api_keys.DESCRIBE_CLUSTER:
        return _replace_each(response, "brokers", "broker_id", mapper)
    if api_key == api_keys.FIND_COORDINATOR:
        if hasattr(response, "coordinators"):
            return _replace_each(response, "coordinators", "node_id", mapper)
        return _replace_one(response, "node_id", mapper)
    return response


def _replace_each(parent: Any, field: str, id_field: str, mapper: AddressMapper) -> Any:
    items = getattr(parent, field)
    if not items:
        return parent
    mapped = tuple(_replace_one(item, id_field, mapper) for item in items)
    return dataclasses.replace(parent, **{field: mapped})


def _replace_one(item: Any, id_field: str, mapper: AddressMapper) -> Any:
    node_id = int(getattr(item, id_field))
    # A coordinator lookup that failed answers node -1 with an empty host: nothing to hide.
    if node_id < 0:
        return item
    host, port = mapper(node_id, item.host, int(item.port))
    return dataclasses.replace(item, host=host, port=i32(port))
