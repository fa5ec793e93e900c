"""Kafka API keys the gateway refers to by name."""

from __future__ import annotations

from typing import Final

PRODUCE: Final = 0
FETCH: Final = 1
LIST_OFFSETS: Final = 2
METADATA: Final = 3
FIND_COORDINATOR: Final = 10
JOIN_GROUP: Final = 11
SYNC_GROUP: Final = 14
SASL_HANDSHAKE: Final = 17
API_VERSIONS: Final = 18
CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
DESCRIBE_CONFIGS: Final = 32
SASL_AUTHENTICATE: Final = 36
CREATE_PARTITIONS: Final = 37
INCREMENTAL_ALTER_CONFIGS: Final = 44
DESCRIBE_CLIENT_QUOTAS: Final = 48
ALTER_CLIENT_QUOTAS: Final = 49
DESCRIBE_QUORUM: Final = 55
DESCRIBE_CLUSTER: Final = 60
SHARE_FETCH: Final = 78
SHARE_ACKNOWLEDGE: Final = 79
