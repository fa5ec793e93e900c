"""The bundle of quota managers one gateway (or one replayed configuration) runs.

Kafka builds its managers in one place (``QuotaFactory.QuotaManagers``) and hands the bundle
to the request handlers; the gateway's runtime and the pipeline's replay both build theirs
here, so a window setting or a config key means the same thing to both.

A bundle also holds the *tenant level* (issue 25): a second bundle of the same four managers
whose "user" is the tenant's name and whose client id is always "", so a tenant's quotas are
Kafka's sensors and formulas keyed by tenant (``tenant=team-a`` configures user ``team-a``
there, ``tenant=<default>`` the default user: each tenant gets the default on its own rate).
And the exempt principals (``quota.exempt.principals``), by user name: metered, never
throttled. :mod:`quotagate.quota.decision` charges both levels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from quotagate.quota.client_quota_manager import ClientQuotaManager
from quotagate.quota.controller_mutation import ControllerMutationQuotaManager
from quotagate.quota.entity import principal_user
from quotagate.quota.quota_config import TENANT, USER, manager_entity
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
    tenants: QuotaManagers | None = None
    """The tenant level: managers keyed by tenant name (None within the tenant level)."""
    exempt_users: set[str] = field(default_factory=set)
    """User names (``alice`` for ``User:alice``) never throttled nor refused by a quota."""

    @classmethod
    def create(
        cls,
        window_num: int = 11,
        window_size_s: int = 1,
        controller_window_num: int = 11,
        controller_window_size_s: int = 1,
        *,
        tenant_level: bool = True,
    ) -> QuotaManagers:
        tenants = None
        if tenant_level:
            tenants = cls.create(
                window_num,
                window_size_s,
                controller_window_num,
                controller_window_size_s,
                tenant_level=False,
            )
        return cls(
            produce=ClientQuotaManager("produce", window_num, window_size_s),
            fetch=ClientQuotaManager("fetch", window_num, window_size_s),
            request=RequestQuotaManager(window_num, window_size_s),
            controller=ControllerMutationQuotaManager(
                controller_window_num, controller_window_size_s
            ),
            tenants=tenants,
        )

    def tenant_level(self, tenant: str) -> QuotaManagers | None:
        """The tenant level a request of ``tenant`` is also charged on (None: no tenant)."""
        return self.tenants if tenant else None

    @property
    def fetch_or_request_enabled(self) -> bool:
        """Whether a fetch or request quota was ever configured, on either level."""
        tenants = self.tenants
        return (
            self.fetch.quotas_enabled
            or self.request.quotas_enabled
            or (tenants is not None and tenants.fetch_or_request_enabled)
        )

    @property
    def request_enabled(self) -> bool:
        """Whether a request quota was ever configured, on either level."""
        tenants = self.tenants
        return self.request.quotas_enabled or (tenants is not None and tenants.request_enabled)

    @property
    def fetch_enabled(self) -> bool:
        """Whether a fetch quota was ever configured, on either level."""
        tenants = self.tenants
        return self.fetch.quotas_enabled or (tenants is not None and tenants.fetch_enabled)

    def set_exempt_principals(self, principals: Iterable[str]) -> None:
        """``quota.exempt.principals``: replaces the set in place (decisions hold this one)."""
        users = {principal_user(principal) for principal in principals}
        self.exempt_users.clear()
        self.exempt_users.update(users)

    @classmethod
    def from_quota_file(cls, quota_file: QuotaFile) -> QuotaManagers:
        """Managers with a quota file's windows (its advisory ``[gateway]``), entries and
        exempt principals (``[broker]``)."""
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
        managers.set_exempt_principals(quota_file.exempt_principals or ())
        return managers

    def all(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller)

    def kinds(self) -> tuple[tuple[str, ClientQuotaManager, str], ...]:
        """Each quota kind as the gateway's metrics name it: (group, manager, what its sensor
        measures). The groups are the usage schema's quota kinds, the controller's in one word
        as Kafka's ``ControllerMutation`` quota type."""
        return (
            ("produce", self.produce, "byte_rate"),
            ("fetch", self.fetch, "byte_rate"),
            ("request", self.request, "request_time"),
            ("controllermutation", self.controller, "tokens"),
        )

    def by_config_key(self, key: str) -> ClientQuotaManager | None:
        """The manager a client-quota key (``producer_byte_rate``, ...) configures."""
        for manager in self.all():
            if manager.quota_type.config_key == key:
                return manager
        return None

    def by_cause(self, cause: Cause) -> ClientQuotaManager | None:
        """The manager whose throttle-time sensor records a throttle of this cause: the
        tenant level's for a tenant cause (its sensors keyed ``(tenant, "")``)."""
        tenants = self.tenants
        return {
            Cause.PRODUCE: self.produce,
            Cause.FETCH: self.fetch,
            Cause.REQUEST: self.request,
            Cause.CONTROLLER_MUTATION: self.controller,
            **(
                {
                    Cause.TENANT_PRODUCE: tenants.produce,
                    Cause.TENANT_FETCH: tenants.fetch,
                    Cause.TENANT_REQUEST: tenants.request,
                    Cause.TENANT_CONTROLLER_MUTATION: tenants.controller,
                }
                if tenants is not None
                else {}
            ),
        }.get(cause)

    def update_quota(self, entity: Mapping[str, str | None], key: str, value: float | None) -> bool:
        """Apply one client-quota value; False when no manager enforces it.

        ``connection_creation_rate`` of ip entities limits connections, not requests; a
        ``tenant`` entity configures the tenant level.
        """
        if TENANT in entity:
            if self.tenants is None:
                return False
            return self.tenants.update_quota({USER: entity[TENANT]}, key, value)
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
        if self.tenants is not None:
            self.tenants.tick(now_ms)
