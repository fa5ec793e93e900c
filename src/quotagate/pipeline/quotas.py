"""Candidate quota configurations: a quota file turned into the engine's managers.

The file format is ``quotagate.quota.quota_file`` (the one the gateway's ``quotas apply``
reads); window settings come from its advisory ``[gateway]`` table when present.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from quotagate.pipeline.errors import PipelineError
from quotagate.quota import (
    DEFAULT,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    EntityName,
    QuotaFile,
    QuotaType,
    load_quota_file,
)

# Quota types the pipeline models, in the order throttle ties are broken after "request".
QUOTA_TYPES: Final = ("produce", "fetch", "request", "controller_mutation")
CONFIG_KEYS: Final = {name: QuotaType.parse(name).config_key for name in QUOTA_TYPES}
WINDOW_NUM: Final = "quota.window.num"
WINDOW_SIZE: Final = "quota.window.size.seconds"
CONTROLLER_WINDOW_NUM: Final = "controller.quota.window.num"
CONTROLLER_WINDOW_SIZE: Final = "controller.quota.window.size.seconds"


@dataclass(slots=True)
class Managers:
    """One engine manager per quota type, loaded with the same configuration."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientQuotaManager
    controller: ControllerMutationQuotaManager

    def by_type(self) -> dict[str, ClientQuotaManager]:
        return {
            "produce": self.produce,
            "fetch": self.fetch,
            "request": self.request,
            "controller_mutation": self.controller,
        }


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
        return load_quota_file(text)
    except ValueError as exc:
        raise PipelineError(f"{source}: {exc}") from None


def build_managers(quota_file: QuotaFile) -> Managers:
    settings = quota_file.gateway
    window_num = int(settings.get(WINDOW_NUM, 11))
    window_size = int(settings.get(WINDOW_SIZE, 1))
    managers = Managers(
        produce=ClientQuotaManager("produce", window_num, window_size),
        fetch=ClientQuotaManager("fetch", window_num, window_size),
        request=ClientQuotaManager("request", window_num, window_size),
        controller=ControllerMutationQuotaManager(
            int(settings.get(CONTROLLER_WINDOW_NUM, 11)),
            int(settings.get(CONTROLLER_WINDOW_SIZE, 1)),
        ),
    )
    by_type = managers.by_type()
    for entry in quota_file.entries:
        if "ip" in entry.entity:
            continue  # connection-rate quotas do not apply to requests
        user = _entity_name(entry.entity, "user")
        client_id = _entity_name(entry.entity, "client-id")
        for quota_type, key in CONFIG_KEYS.items():
            if key in entry.config:
                by_type[quota_type].update_quota(user, client_id, entry.config[key])
    return managers


def window_seconds(quota_file: QuotaFile) -> int:
    return int(quota_file.gateway.get(WINDOW_SIZE, 1))


def _entity_name(entity: dict[str, str | None], entity_type: str) -> EntityName:
    if entity_type not in entity:
        return None
    name = entity[entity_type]
    return DEFAULT if name is None else name
