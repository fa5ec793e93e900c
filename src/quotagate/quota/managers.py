"""The bundle of quota managers one gateway (or one replayed configuration) runs.

Kafka builds its managers in one place (``QuotaFactory.QuotaManagers``) and hands the bundle
to the request handlers; the gateway's runtime and the pipeline's replay both build theirs
here, so a window setting or a config key means the same thing to both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from quotagate.quota.client_quota_manager import ClientQuotaManager
from quotagate.quota.controller_mutation import ControllerMutationQuotaManager
from quotagate.quota.quota_config import manager_entity
from quotagate.quota.quota_file import QuotaFile
from quotagate.quota.request_quota_manager import RequestQuotaManager
from quotagate.quota.throttle_choice import Cause

# Kafka's broker settings for the sample windows, with their defaults.
WINDOW_NUM: Final = "quota.window.num"
WINDOW_SIZE: Final = "quota.window.size.seconds"
CONTROLLER_WINDOW_NUM: Final = "controller.quota.window.num"
CONTROLLER_WINDOW_SIZE: Final = "controller.quota.window.size.seconds"
WINDOW_DEFAULTS: Final[Mapping[str, int]] = {
    WINDOW_NUM: 11,
    WINDOW_SIZE: 1,
    CONTROLLER_WINDOW_NUM: 11,
    CONTROLLER_WINDOW_SIZE: 1,
}


@dataclass(frozen=True, slots=True)
class QuotaManagers:
    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: RequestQuotaManager
    controller: ControllerMutationQuotaManager

    @classmethod
    def create(
        cls,
        window_num: int = 11,
        window_size_s: int = 1,
        controller_window_num: int = 11,
        controller_window_size_s: int = 1,
    ) -> QuotaManagers:
        return cls(
            produce=ClientQuotaManager("produce", window_num, window_size_s),
            fetch=ClientQuotaManager("fetch", window_num, window_size_s),
            request=RequestQuotaManager(window_num, window_size_s),
            controller=ControllerMutationQuotaManager(
                controller_window_num, controller_window_size_s
            ),
        )

    @classmethod
    def from_quota_file(cls, quota_file: QuotaFile) -> QuotaManagers:
        """Managers with a quota file's windows (its advisory ``[gateway]``) and entries."""
        settings = {
            key: int(quota_file.gateway.get(key, default))
            for key, default in WINDOW_DEFAULTS.items()
        }
        managers = cls.create(
            settings[WINDOW_NUM],
            settings[WINDOW_SIZE],
            settings[CONTROLLER_WINDOW_NUM],
            settings[CONTROLLER_WINDOW_SIZE],
        )
        for entry in quota_file.entries:
            for key, value in entry.config.items():
                managers.update_quota(entry.entity, key, value)
        return managers

    def all(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller)

    def by_config_key(self, key: str) -> ClientQuotaManager | None:
        """The manager a client-quota key (``producer_byte_rate``, ...) configures."""
        for manager in self.all():
            if manager.quota_type.config_key == key:
                return manager
        return None

    def by_cause(self, cause: Cause) -> ClientQuotaManager | None:
        """The manager whose throttle-time sensor records a throttle of this cause."""
        return {
            Cause.PRODUCE: self.produce,
            Cause.FETCH: self.fetch,
            Cause.REQUEST: self.request,
            Cause.CONTROLLER_MUTATION: self.controller,
        }.get(cause)

    def update_quota(self, entity: Mapping[str, str | None], key: str, value: float | None) -> bool:
        """Apply one client-quota value; False when no manager enforces it.

        ``connection_creation_rate`` of ip entities limits connections, not requests.
        """
        manager = self.by_config_key(key)
        if manager is None or "ip" in entity:
            return False
        user, client_id = manager_entity(entity)
        manager.update_quota(user, client_id, value)
        return True

    def tick(self, now_ms: int) -> None:
        """Release ended throttles and drop idle sensors (Kafka's reaper and expiry)."""
        for manager in self.all():
            manager.due_channels(now_ms)
            manager.expire_sensors(now_ms)
