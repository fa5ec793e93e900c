"""ApiVersions negotiation: the highest version of an API that both sides speak."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from quotagate.client.errors import UnsupportedVersionError
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.api_support import VersionRange

# The APIs the admin client sends; it builds every version kio models for them.
CLIENT_APIS: Final = (
    api_keys.API_VERSIONS,
    api_keys.METADATA,
    api_keys.CREATE_TOPICS,
    api_keys.DELETE_TOPICS,
    api_keys.CREATE_PARTITIONS,
    api_keys.DESCRIBE_CLIENT_QUOTAS,
    api_keys.ALTER_CLIENT_QUOTAS,
    api_keys.INCREMENTAL_ALTER_CONFIGS,
    api_keys.DESCRIBE_CONFIGS,
)


def client_range(api_key: int) -> range:
    versions = api_table.modelled_versions(api_key)
    if versions is None or api_key not in CLIENT_APIS:
        raise UnsupportedVersionError(f"the client does not speak {api_table.api_name(api_key)}")
    return versions


def max_api_versions_version() -> int:
    return client_range(api_keys.API_VERSIONS).stop - 1


def choose_version(api_key: int, broker: Mapping[int, VersionRange]) -> int:
    """The highest version in both the client's and the broker's range."""
    ours = client_range(api_key)
    theirs = broker.get(api_key)
    name = api_table.api_name(api_key)
    if theirs is None:
        raise UnsupportedVersionError(f"the broker does not support {name}")
    high = min(ours.stop - 1, theirs.max_version)
    if high < max(ours.start, theirs.min_version):
        raise UnsupportedVersionError(
            f"no common version of {name}: client {ours.start}-{ours.stop - 1}, "
            f"broker {theirs.min_version}-{theirs.max_version}"
        )
    return high
