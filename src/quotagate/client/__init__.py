"""An asyncio Kafka admin client with KIP-599 quota retries, KIP-219 self-throttling and
KIP-580 backoff; :class:`SyncAdminClient` wraps it for code that is not async."""

from quotagate.client.admin import AdminClient, QuotaValues
from quotagate.client.config import AdminConfig, parse_bootstrap
from quotagate.client.errors import (
    ConnectError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    RequestTimeoutError,
    ThrottlingQuotaExceededError,
    UnsupportedVersionError,
)
from quotagate.client.events import ClientEvents
from quotagate.client.quotas import ClientQuotaAlteration, ClientQuotaEntity, QuotaOp
from quotagate.client.requests import NewTopic
from quotagate.client.results import AdminResult
from quotagate.client.sync import SyncAdminClient
from quotagate.quota.entity_filter import ClientQuotaFilter, FilterComponent

__all__ = [
    "AdminClient",
    "AdminConfig",
    "AdminResult",
    "ClientEvents",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilter",
    "ConnectError",
    "FilterComponent",
    "KafkaError",
    "KafkaTimeoutError",
    "NetworkError",
    "NewTopic",
    "QuotaOp",
    "QuotaValues",
    "RequestTimeoutError",
    "SyncAdminClient",
    "ThrottlingQuotaExceededError",
    "UnsupportedVersionError",
    "parse_bootstrap",
]
