"""Which entity level a rollup groups by when no quota configuration is given.

Kafka groups clients by the configured quotas; with none configured there is nothing to
group by, so the pipeline stands in a *template*: a default entity at the chosen level.
Only its shape matters (it decides the sharing keys); its value is never reported.
"""

from __future__ import annotations

from typing import Final

from quotagate.pipeline.errors import PipelineError
from quotagate.quota import QuotaFile, QuotaFileEntry, dump_quota_file

LEVELS: Final = {
    "user": {"user": None},
    "client-id": {"client-id": None},
    "user,client-id": {"user": None, "client-id": None},
}
# Large, but a valid LONG for every quota key.
_PLACEHOLDER: Final = 9.0e15


def check_level(level: str) -> None:
    if level not in LEVELS:
        raise PipelineError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")


def template_quota_text(level: str) -> str:
    check_level(level)
    config = {
        "producer_byte_rate": _PLACEHOLDER,
        "consumer_byte_rate": _PLACEHOLDER,
        "request_percentage": _PLACEHOLDER,
        "controller_mutation_rate": _PLACEHOLDER,
    }
    return dump_quota_file(QuotaFile([QuotaFileEntry(dict(LEVELS[level]), config)]))
