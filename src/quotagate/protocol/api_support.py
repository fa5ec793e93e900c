"""What the gateway speaks, and the ApiVersions answer it gives clients.

A client may use a version only if both the upstream broker and the gateway handle it. The
gateway handles every version kio models, minus those whose responses would carry broker
endpoints inside record-bearing messages (rewriting them would mean decoding record
batches), plus the versions Kafka 4.0 removed but Fetch v0-2, and passes API keys kio does
not know through raw, as the upstream advertises them. APIs the gateway answers itself (SASL
on the gateway, client quotas) are advertised with the gateway's own range whether or not
the upstream has them.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i16

from quotagate.protocol import api_keys, api_table
from quotagate.protocol.errors import ErrorCode

# Produce v10+ and Fetch v16+ carry NodeEndpoints (KIP-951) and DescribeQuorum v2+ carries
# controller listeners: capping here keeps every address-bearing response rewritable.
VERSION_CAPS: Final[Mapping[int, int]] = {
    api_keys.PRODUCE: 9,
    api_keys.FETCH: 15,
    api_keys.DESCRIBE_QUORUM: 1,
}

# KIP-890: a client that sees transaction.version 2 finalized leaves AddPartitionsToTxn out
# and relies on the broker adding partitions from transactional Produce requests, which it
# does only from Produce v12. With Produce capped below that, the gateway advertises the
# feature at most at level 1, so clients run transactions the way brokers still accept.
_TRANSACTION_V2_PRODUCE: Final = 12
FEATURE_CAPS: Final[Mapping[str, int]] = (
    {"transaction.version": 1} if VERSION_CAPS[api_keys.PRODUCE] < _TRANSACTION_V2_PRODUCE else {}
)

# KIP-932 share-group data APIs carry NodeEndpoints in every version.
NOT_ADVERTISED: Final = frozenset({api_keys.SHARE_FETCH, api_keys.SHARE_ACKNOWLEDGE})

# The versions Kafka 4.0 removed are forwarded as they are (Produce v0-2, Fetch v3,
# CreateTopics v0-1 and DeleteTopics v0 metered by hand) and so advertised, except Fetch v0-2:
# a client under a fetch quota gets UNSUPPORTED_VERSION for them, which a client should never
# be offered.
_REMOVED_ADVERTISED_FROM: Final[Mapping[int, int]] = {api_keys.FETCH: 3}


class VersionRange(NamedTuple):
    api_key: int
    min_version: int
    max_version: int


def gateway_range(api_key: int) -> range | None:
    """Versions of ``api_key`` the gateway can forward and understand, None if unmodelled."""
    if api_key in NOT_ADVERTISED:
        return range(0)
    versions = api_table.modelled_versions(api_key)
    if versions is None:
        return None
    if api_table.removed_versions(api_key):
        versions = range(_REMOVED_ADVERTISED_FROM.get(api_key, 0), versions.stop)
    cap = VERSION_CAPS.get(api_key)
    if cap is not None and cap < versions.stop - 1:
        return range(versions.start, cap + 1)
    return versions


def negotiate(upstream: Iterable[VersionRange], local: Mapping[int, range]) -> list[VersionRange]:
    """The version ranges to advertise, ordered by api key."""
    result: dict[int, VersionRange] = {}
    for api_key, versions in local.items():
        if versions:
            result[api_key] = VersionRange(api_key, versions.start, versions.stop - 1)
    for entry in upstream:
        if entry.api_key in result:
            continue
        ours = gateway_range(entry.api_key)
        if ours is None:  # unmodelled: forwarded raw, so the upstream's range stands
            result[entry.api_key] = entry
            continue
        low = max(entry.min_version, ours.start)
        high = min(entry.max_version, ours.stop - 1)
        if low <= high:
            result[entry.api_key] = VersionRange(entry.api_key, low, high)
    return [result[key] for key in sorted(result)]


def best_version(api_key: int, ranges: Iterable[VersionRange]) -> int:
    """The highest version of ``api_key`` both the upstream (its ApiVersions ``ranges``) and
    kio model; kio's lowest when the upstream does not list the API."""
    ours = api_table.modelled_versions(api_key)
    if ours is None:
        raise ValueError(f"api {api_key} is not modelled")
    for entry in ranges:
        if entry.api_key == api_key:
            return max(min(entry.max_version, ours.stop - 1), ours.start)
    return ours.start


def advertised_ranges(response: Any) -> list[VersionRange]:
    """The ranges an ApiVersions response (kio entity, any version) advertises."""
    return [
        VersionRange(int(item.api_key), int(item.min_version), int(item.max_version))
        for item in response.api_keys
    ]


def with_ranges(response: Any, ranges: Iterable[VersionRange]) -> Any:
    """An ApiVersions response (kio entity) advertising ``ranges`` instead."""
    entry_type = sys.modules[type(response).__module__].ApiVersion
    entries = tuple(
        entry_type(api_key=r.api_key, min_version=r.min_version, max_version=r.max_version)
        for r in ranges
    )
    return dataclasses.replace(response, api_keys=entries)


def unsupported_version_response(max_version: int) -> Any:
    """What Kafka answers to an ApiVersions version it does not know: a v0 body with
    UNSUPPORTED_VERSION and the ApiVersions range, so the client can retry lower."""
    return ApiVersionsResponse(
        error_code=KioErrorCode(ErrorCode.UNSUPPORTED_VERSION),
        api_keys=(
            ApiVersion(
                api_key=i16(api_keys.API_VERSIONS),
                min_version=i16(0),
                max_version=i16(max_version),
            ),
        ),
    )
