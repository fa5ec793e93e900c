"""Candidate quota configurations: quota files read, checked and turned into managers.

The file format is ``quotagate.quota.quota_file`` (the one the gateway's ``quotas apply``
reads); window settings come from its advisory ``[gateway]`` table when present, and the
managers are built by the engine's ``QuotaManagers``, as the gateway builds its own (with the
exempt principals of its ``[broker]`` table). Its ``tenant.mapping.rules``, when given, are
read by the gateway's own parser and mapper (``security.tenant_mapping``): the candidate's
tenants replace those the events recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from quotagate.pipeline.errors import PipelineError
from quotagate.quota import ClientQuotaManager, QuotaFile, QuotaManagers, QuotaType, load_quota_file
from quotagate.quota.managers import WINDOW_SIZE
from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper

# Quota types the pipeline models, in the order throttle ties are broken after "request".
QUOTA_TYPES: Final = ("produce", "fetch", "request", "controller_mutation")
CONFIG_KEYS: Final = {name: QuotaType.parse(name).config_key for name in QUOTA_TYPES}


def read_quota_text(path: str | Path | None) -> str:
    """The text of a quota file ("" for none = no quotas), checked to parse."""
    if path is None:
        return ""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PipelineError(f"cannot read quota file {path}: {exc.strerror}") from None
    parse_quotas(text, source=str(path))
    return text


def parse_quotas(text: str, *, source: str = "quota file") -> QuotaFile:
    try:
        quota_file = load_quota_file(text)
    except ValueError as exc:
        raise PipelineError(f"{source}: {exc}") from None
    candidate_tenants(quota_file, source=source)
    return quota_file


def candidate_tenants(quota_file: QuotaFile, *, source: str = "quota file") -> TenantMapper | None:
    """The candidate's tenant mapping (the gateway's parser and mapper); None when the file
    gives no ``tenant.mapping.rules``, and the events' recorded tenants stand."""
    if quota_file.tenant_mapping_rules is None:
        return None
    try:
        return TenantMapper.from_rules(quota_file.tenant_mapping_rules)
    except InvalidRuleError as exc:
        raise PipelineError(f"{source}: [broker] {exc}") from None


def window_seconds(quota_file: QuotaFile) -> int:
    return int(quota_file.gateway.get(WINDOW_SIZE, 1))


def managers_by_type(quota_file: QuotaFile) -> dict[str, ClientQuotaManager]:
    """The engine's managers for a candidate file, by the pipeline's quota-type names."""
    return dict(zip(QUOTA_TYPES, QuotaManagers.from_quota_file(quota_file).all(), strict=True))
