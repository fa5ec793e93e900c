"""The quota plug-in's configuration: the store it follows, and the admin writes to it.

Brings the engine's managers and the topic bytes-in thresholds in line with the store (at
start, when another process wrote, and at every housekeeping tick), and applies the admin
writes the gateway answers itself (AlterClientQuotas, thresholds through
IncrementalAlterConfigs) to both at once. ``connection_creation_rate`` quotas of ip entities
are not request quotas: they go to the gateway's connection limits once attached.

Also the tenant settings (issue 25): ``tenant.mapping.rules`` (which tenant a request
belongs to: :attr:`QuotaStoreSync.tenant_mapper`) and ``quota.exempt.principals`` (on the
managers), stored as text settings so a fleet shares them; the config file's values hold
until the store has one, and again once it is deleted, as for the total threshold.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

from quotagate.enforcement.settings import QuotaSettings
from quotagate.enforcement.shadow import ShadowQuotas
from quotagate.gateway import ConnectionLimits
from quotagate.logs import kv
from quotagate.quota import QuotaManagers, TopicBytesInQuota
from quotagate.quota.principal_list import parse_principal_list, principal_list_text
from quotagate.quota.shadow_keys import is_shadow_key, live_key
from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper
from quotagate.store.backends import QuotaBackend
from quotagate.store.quotas import (
    EXEMPT_PRINCIPALS_SETTING,
    TENANT_MAPPING_RULES_SETTING,
    Change,
    EntityKey,
    entity_key,
)

log = logging.getLogger(__name__)

IP: Final = "ip"
IP_CONNECTION_RATE: Final = "connection_creation_rate"


class QuotaStoreSync:
    def __init__(
        self,
        settings: QuotaSettings,
        managers: QuotaManagers,
        topic_quota: TopicBytesInQuota,
        store: QuotaBackend | None,
        shadow: ShadowQuotas | None = None,
    ) -> None:
        self.settings = settings
        self.managers = managers
        self.shadow = shadow
        """The shadow set, which the store's ``shadow.<key>`` values configure."""
        self.topic_quota = topic_quota
        self.store = store
        self.client_quotas: dict[EntityKey, dict[str, float]] = {}
        self.connections: ConnectionLimits | None = None
        """The gateway's connection quotas, once attached (ip ``connection_creation_rate``)."""
        self._store_version: int | None = None
        self.tenant_mapper = TenantMapper()
        """``tenant.mapping.rules`` in force: the tenant of each (user, client id)."""
        self._rules_text: str | None = None
        self.exempt_principals: tuple[str, ...] = ()
        self._rules_stored = False
        self._exempt_stored = False
        if store is not None:
            self.reload()
        else:
            self._load_tenancy()

    def reload(self) -> None:
        """Bring the managers and thresholds in line with the store (another process wrote)."""
        store = self.store
        if store is None:
            return
        self._store_version = store.data_version()
        wanted = store.client_quotas()
        for key in set(self.client_quotas) | set(wanted):
            old = self.client_quotas.get(key, {})
            new = wanted.get(key, {})
            for quota_key in set(old) | set(new):
                if old.get(quota_key) != new.get(quota_key):
                    self._apply(dict(key), quota_key, new.get(quota_key))
        self.client_quotas = wanted
        total = store.total_threshold()
        if total is None:
            total = self.settings.total_bytes_in_threshold
        thresholds = store.topic_thresholds()
        quota = self.topic_quota
        for topic in set(quota.explicit_thresholds) - set(thresholds):
            quota.set_topic_threshold(topic, None)
        # Order matters for the sum rule: lower thresholds first, raise the total first.
        if total is not None and (quota.total_threshold is None or total > quota.total_threshold):
            quota.set_total_threshold(total)
        for topic, value in sorted(thresholds.items(), key=lambda item: item[1]):
            if quota.explicit_thresholds.get(topic) != value:
                try:
                    quota.set_topic_threshold(topic, value)
                except ValueError as exc:
                    log.warning(kv("threshold_not_applied", topic=topic, error=exc))
        if total != quota.total_threshold:
            try:
                quota.set_total_threshold(total)
            except ValueError as exc:
                log.warning(kv("threshold_not_applied", topic="<total>", error=exc))
        self._load_tenancy()

    # -- tenants and exemptions --------------------------------------------------------------

    def _load_tenancy(self) -> None:
        store = self.store
        rules = store.text_setting(TENANT_MAPPING_RULES_SETTING) if store is not None else None
        self._rules_stored = rules is not None
        if rules is None:
            rules = self.settings.tenant_mapping_rules
        self._use_rules(rules)
        exempt = store.text_setting(EXEMPT_PRINCIPALS_SETTING) if store is not None else None
        self._exempt_stored = exempt is not None
        if exempt is None:
            self._use_exempt(sorted(self.settings.exempt_principals or ()))
            return
        try:
            self._use_exempt(parse_principal_list(exempt))
        except ValueError as exc:
            log.error(kv("exempt_principals_not_applied", error=exc))

    def _use_rules(self, text: str | None) -> None:
        if text == self._rules_text:
            return
        try:
            mapper = TenantMapper.from_rules(text)
        except InvalidRuleError as exc:
            # Only a store written by something else can hold such rules: keep those in force.
            log.error(kv("tenant_rules_not_applied", error=exc))
            return
        self.tenant_mapper = mapper
        self._rules_text = text
        log.info(kv("tenant_rules_in_force", rules=str(mapper) or "<none>"))

    def _use_exempt(self, principals: list[str]) -> None:
        if tuple(principals) == self.exempt_principals:
            return
        self.exempt_principals = tuple(principals)
        self.managers.set_exempt_principals(principals)
        log.info(kv("exempt_principals_in_force", principals=",".join(principals) or "<none>"))

    @property
    def tenant_rules_in_force(self) -> tuple[str, bool]:
        """The rules in force as written, and whether the store (not the file) set them."""
        return self._rules_text or "", self._rules_stored

    @property
    def exempt_principals_in_force(self) -> tuple[tuple[str, ...], bool]:
        """The exempt principals, and whether the store (not the file) set them."""
        return self.exempt_principals, self._exempt_stored

    def set_tenant_rules(self, text: str | None, principal: str) -> None:
        """Store new rules (None: back to the config file's); raises ``InvalidRuleError``."""
        TenantMapper.from_rules(text)
        if self.store is not None:
            self.store.set_text_setting(
                TENANT_MAPPING_RULES_SETTING, text, principal, "IncrementalAlterConfigs"
            )
            self._store_version = self.store.data_version()
        log.info(kv("tenant_rules_changed", rules=text, principal=principal))
        self._rules_stored = text is not None
        self._use_rules(text if text is not None else self.settings.tenant_mapping_rules)

    def set_exempt_principals(self, principals: list[str] | None, principal: str) -> None:
        """Store the exempt principals (None: back to the config file's)."""
        text = None if principals is None else principal_list_text(principals)
        if self.store is not None:
            self.store.set_text_setting(
                EXEMPT_PRINCIPALS_SETTING, text, principal, "IncrementalAlterConfigs"
            )
            self._store_version = self.store.data_version()
        log.info(kv("exempt_principals_changed", principals=text, principal=principal))
        self._exempt_stored = principals is not None
        if principals is None:
            principals = sorted(self.settings.exempt_principals or ())
        self._use_exempt(principals)

    def store_changed(self) -> None:
        store = self.store
        if store is not None and store.data_version() != self._store_version:
            try:
                self.reload()
            except Exception:
                log.exception("store_reload_failed")

    def alter_client_quotas(
        self, changes: list[Change], principal: str, source: str
    ) -> list[Change]:
        """Store and apply at once: the next request of an affected client sees them."""
        if self.store is not None:
            applied = self.store.alter_client_quotas(changes, principal, source)
            self._store_version = self.store.data_version()
        else:
            applied = [c for c in changes if self._current(c) != c.value]
        for change in applied:
            key = entity_key(change.entity)
            values = self.client_quotas.setdefault(key, {})
            if change.value is None:
                values.pop(change.key, None)
                if not values:
                    del self.client_quotas[key]
            else:
                values[change.key] = change.value
            self._apply(change.entity, change.key, change.value)
            log.info(
                kv(
                    "client_quota_changed",
                    entity=_entity_text(change.entity),
                    key=change.key,
                    value=change.value,
                    principal=principal,
                    source=source,
                )
            )
        return applied

    def set_topic_threshold(self, topic: str, value: float | None, principal: str) -> None:
        """Validate against the sum rule, then store; raises ``ThresholdError``."""
        self.topic_quota.set_topic_threshold(topic, value)
        if self.store is not None:
            self.store.set_topic_threshold(topic, value, principal, "IncrementalAlterConfigs")
            self._store_version = self.store.data_version()
        log.info(kv("topic_threshold_changed", topic=topic, value=value, principal=principal))

    def set_total_threshold(self, value: float | None, principal: str) -> None:
        self.topic_quota.set_total_threshold(value)
        if self.store is not None:
            self.store.set_total_threshold(value, principal, "IncrementalAlterConfigs")
            self._store_version = self.store.data_version()
        log.info(kv("total_threshold_changed", value=value, principal=principal))

    def is_super_user(self, principal: str | None) -> bool:
        return principal is not None and principal in self.settings.super_users

    def may_alter(self, principal: str | None, api: str) -> bool:
        """Whether ``principal`` may alter through ``api``: super users only (docs/engine.md,
        "Who may alter"). A refusal is logged with what would allow it."""
        if self.is_super_user(principal):
            return True
        log.warning(
            kv(
                "alter_refused",
                api=api,
                principal=principal or "",
                reason="not a super user" if self.settings.super_users else "no super users",
                fix='name the principal in [quotas] "super.users"',
            )
        )
        return False

    def _current(self, change: Change) -> float | None:
        return self.client_quotas.get(entity_key(change.entity), {}).get(change.key)

    def attach_connections(self, connections: ConnectionLimits) -> None:
        """Enforce ``connection_creation_rate`` of ip entities through the gateway's
        acceptors, starting with what the store holds now."""
        self.connections = connections
        for key, values in self.client_quotas.items():
            rate = values.get(IP_CONNECTION_RATE)
            if rate is not None:
                self._apply(dict(key), IP_CONNECTION_RATE, rate)

    def _apply(self, entity: Mapping[str, str | None], key: str, value: float | None) -> None:
        if is_shadow_key(key):
            if self.shadow is not None:
                self.shadow.update_quota(entity, live_key(key), value)
            return
        if key == IP_CONNECTION_RATE and IP in entity:
            # Not a request quota: the gateway's acceptors enforce it (Kafka's
            # ConnectionQuotas); with no gateway attached (a replay) it is only stored.
            if self.connections is not None:
                self.connections.set_ip_connection_rate(entity[IP], value)
            return
        self.managers.update_quota(entity, key, value)

    def follow(self) -> None:
        """Reload if the store changed since it was last read (a housekeeping tick)."""
        store = self.store
        if store is not None and store.data_version() != self._store_version:
            self.reload()

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


def _entity_text(entity: Mapping[str, str | None]) -> str:
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in sorted(entity.items()))
