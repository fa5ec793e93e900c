"""The quota engine: Kafka's client-quota arithmetic, pure and deterministic.

Time is always an argument (epoch milliseconds); nothing here touches a socket, a thread
or a clock, so the gateway and the replay pipeline run the very same code.
"""

from quotagate.quota.backoff import ExponentialBackoff
from quotagate.quota.client_quota_manager import ClientQuotaManager, QuotaSensorState
from quotagate.quota.controller_mutation import (
    STRICT_SINCE_VERSION,
    THROTTLING_QUOTA_EXCEEDED,
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceeded,
)
from quotagate.quota.cumulative_sum import CumulativeSum
from quotagate.quota.decision import (
    NOT_ADMITTED,
    Admission,
    Decision,
    RequestFacts,
    admit,
    admit_mutations,
    decide,
    mutation_throttle,
    settle,
)
from quotagate.quota.entity import (
    DEFAULT,
    ClientIdPrefix,
    EntityName,
    QuotaEntity,
    SharingKey,
    principal_user,
    sanitize_user,
)
from quotagate.quota.entity_filter import ClientQuotaFilter, FilterComponent, MatchType
from quotagate.quota.ewma_meter import EwmaMeter
from quotagate.quota.java import UNBOUNDED, java_round
from quotagate.quota.managers import QuotaManagers
from quotagate.quota.metric_config import MetricConfig, Quota
from quotagate.quota.quota_config import QUOTA_KEYS, QuotaConfigError, validate_alteration
from quotagate.quota.quota_file import QuotaFile, QuotaFileEntry, dump_quota_file, load_quota_file
from quotagate.quota.quota_type import QuotaType
from quotagate.quota.rate import Rate, SimpleRate
from quotagate.quota.request_quota_manager import RequestQuotaManager, nanos_to_percentage
from quotagate.quota.request_rules import Charging, OtherQuota, classify
from quotagate.quota.sampled_stat import Avg, Max, Min, WindowedCount, WindowedSum
from quotagate.quota.sensor import QuotaViolation, Sensor
from quotagate.quota.throttle import bounded_throttle_time, throttle_time
from quotagate.quota.throttle_choice import Cause, choose_throttle
from quotagate.quota.throttled_channels import ThrottledChannels
from quotagate.quota.token_bucket import TokenBucket
from quotagate.quota.topic_bytes_in import Refusal, ThresholdError, TopicBytesInQuota

__all__ = [
    "DEFAULT",
    "NOT_ADMITTED",
    "QUOTA_KEYS",
    "STRICT_SINCE_VERSION",
    "THROTTLING_QUOTA_EXCEEDED",
    "THROTTLING_QUOTA_EXCEEDED_MESSAGE",
    "UNBOUNDED",
    "Admission",
    "Avg",
    "Cause",
    "Charging",
    "ClientIdPrefix",
    "ClientQuotaFilter",
    "ClientQuotaManager",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "CumulativeSum",
    "Decision",
    "EntityName",
    "EwmaMeter",
    "ExponentialBackoff",
    "FilterComponent",
    "MatchType",
    "Max",
    "MetricConfig",
    "Min",
    "OtherQuota",
    "Quota",
    "QuotaConfigError",
    "QuotaEntity",
    "QuotaFile",
    "QuotaFileEntry",
    "QuotaManagers",
    "QuotaSensorState",
    "QuotaType",
    "QuotaViolation",
    "Rate",
    "Refusal",
    "RequestFacts",
    "RequestQuotaManager",
    "Sensor",
    "SharingKey",
    "SimpleRate",
    "ThresholdError",
    "ThrottledChannels",
    "ThrottlingQuotaExceeded",
    "TokenBucket",
    "TopicBytesInQuota",
    "WindowedCount",
    "WindowedSum",
    "admit",
    "admit_mutations",
    "bounded_throttle_time",
    "choose_throttle",
    "classify",
    "decide",
    "dump_quota_file",
    "java_round",
    "load_quota_file",
    "mutation_throttle",
    "nanos_to_percentage",
    "principal_user",
    "sanitize_user",
    "settle",
    "throttle_time",
    "validate_alteration",
]
