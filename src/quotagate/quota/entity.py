"""Quota entities, the eight-level resolution and sharing keys (Kafka's default quota callback).

An entity is a (user, client-id) pair where each part is a name, ``DEFAULT`` (the
``<default>`` entity) or ``None`` (not part of the entity). Which clients share one rate is
decided by *sharing keys* (Kafka's metric tags): a pair of strings where "" means "this level
is not in the key". Which levels can appear depends on which kinds of entity have ever been
configured, a sticky set that only a restart clears.
"""

from __future__ import annotations

import enum
import urllib.parse
from dataclasses import dataclass
from typing import Final, TypeAlias


class _Default(enum.Enum):
    DEFAULT = "<default>"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default.DEFAULT
"""The ``<default>`` entity: ``kafka-configs --entity-default``, a ``null`` name in KIP-546."""

EntityName: TypeAlias = str | _Default | None
SharingKey: TypeAlias = tuple[str, str]


ANONYMOUS_USER: Final = "ANONYMOUS"


def principal_user(principal: str | None) -> str:
    """The user a quota manager takes for a principal: ``User:alice`` -> ``alice``.

    Kafka keys user quotas by the principal's name; a connection not (yet) authenticated is
    Kafka's ``ANONYMOUS``.
    """
    if not principal:
        return ANONYMOUS_USER
    _, sep, name = principal.partition(":")
    return name if sep else principal


def sanitize_user(name: str) -> str:
    """URL-encode a principal name as Kafka's ``Sanitizer``: ``%20``, ``%2A``, ``%7E``."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize_user(name: str) -> str:
    """Java's ``URLDecoder``: ``+`` also decodes to a space."""
    return urllib.parse.unquote_plus(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A configured quota's target; ``user`` holds the *sanitised* user name."""

    user: EntityName = None
    client_id: EntityName = None

    @classmethod
    def of(cls, user: EntityName, client_id: EntityName) -> QuotaEntity:
        """Build from a raw user name (sanitised here) and a raw client id."""
        return cls(sanitize_user(user) if isinstance(user, str) else user, client_id)

    @property
    def kind(self) -> int:
        """The bit this entity sets in the enabled-kinds set."""
        if self.user is not None and self.client_id is not None:
            return USER_CLIENT_ID_QUOTAS
        if self.user is not None:
            return USER_QUOTAS
        if self.client_id is not None:
            return CLIENT_ID_QUOTAS
        return NO_QUOTAS

    @property
    def involves_default(self) -> bool:
        return self.user is DEFAULT or self.client_id is DEFAULT

    def __str__(self) -> str:
        parts = []
        if self.user is not None:
            parts.append(f"users/{'<default>' if self.user is DEFAULT else self.user}")
        if self.client_id is not None:
            parts.append(f"clients/{'<default>' if self.client_id is DEFAULT else self.client_id}")
        return "/".join(parts) or "<empty>"


NO_QUOTAS: Final = 0
CLIENT_ID_QUOTAS: Final = 1
USER_QUOTAS: Final = 2
USER_CLIENT_ID_QUOTAS: Final = 4
_SINGLE_KINDS: Final = frozenset({NO_QUOTAS, CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS})


class QuotaLimits:
    """The configured quotas of one quota type and the sticky set of enabled kinds."""

    __slots__ = ("_limits", "kinds_enabled")

    def __init__(self) -> None:
        self._limits: dict[QuotaEntity, float] = {}
        self.kinds_enabled = NO_QUOTAS

    def set(self, entity: QuotaEntity, value: float | None) -> None:
        if value is None:
            self._limits.pop(entity, None)
        else:
            self._limits[entity] = value
        self.kinds_enabled |= entity.kind

    def get(self, entity: QuotaEntity) -> float | None:
        return self._limits.get(entity)

    def entries(self) -> dict[QuotaEntity, float]:
        return dict(self._limits)

    @property
    def single_kind(self) -> bool:
        return self.kinds_enabled in _SINGLE_KINDS

    def sharing_key(self, user: str, client_id: str) -> SharingKey:
        """The key of the rate this (sanitised user, client id) is measured on."""
        kinds = self.kinds_enabled
        if kinds in (NO_QUOTAS, CLIENT_ID_QUOTAS):
            return ("", client_id)
        if kinds == USER_QUOTAS:
            return (user, "")
        if kinds == USER_CLIENT_ID_QUOTAS:
            return (user, client_id)
        limits = self._limits
        for entity_user, entity_client, key in (
            (user, client_id, (user, client_id)),
            (user, DEFAULT, (user, client_id)),
            (user, None, (user, "")),
            (DEFAULT, client_id, (user, client_id)),
            (DEFAULT, DEFAULT, (user, client_id)),
            (DEFAULT, None, (user, "")),
        ):
            if QuotaEntity(entity_user, entity_client) in limits:
                return key
        return ("", client_id)

    def limit_for_key(self, key: SharingKey) -> float | None:
        """The quota that applies to a sharing key, or None when nothing is configured."""
        limits = self._limits
        for entity in _candidates(key):
            value = limits.get(entity)
            if value is not None:
                return value
        return None

    def source_for_key(self, key: SharingKey) -> QuotaEntity | None:
        """The configured entity whose quota applies to a sharing key (its level), if any."""
        limits = self._limits
        for entity in _candidates(key):
            if entity in limits:
                return entity
        return None

    def key_of(self, entity: QuotaEntity) -> SharingKey | None:
        """The one sharing key a non-default entity configures in single-kind mode."""
        if entity.involves_default:
            return None
        user = entity.user if isinstance(entity.user, str) else ""
        client_id = entity.client_id if isinstance(entity.client_id, str) else ""
        return (user, client_id)


def _candidates(key: SharingKey) -> tuple[QuotaEntity, ...]:
    """The entities that may configure a sharing key, most specific first (Kafka's order)."""
    user, client_id = key
    if user and client_id:
        return (
            QuotaEntity(user, client_id),
            QuotaEntity(user, DEFAULT),
            QuotaEntity(DEFAULT, client_id),
            QuotaEntity(DEFAULT, DEFAULT),
        )
    if user:
        return (QuotaEntity(user, None), QuotaEntity(DEFAULT, None))
    if client_id:
        return (QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT))
    return ()


NO_SOURCE: Final = "none"
"""The quota source of a sharing key no configured entity applies to (unbounded)."""


def quota_source(entity: QuotaEntity | None) -> str:
    """Which of Kafka's eight levels an entity is, in ``kafka-configs`` terms.

    ``user+client-id`` is /config/users/<user>/clients/<client-id> (level 1), down to
    ``default-client-id``, /config/clients/<default> (level 8). A small fixed set of
    values, so it can label a metric without multiplying its series.
    """
    if entity is None:
        return NO_SOURCE
    parts = []
    if entity.user is not None:
        parts.append("default-user" if entity.user is DEFAULT else "user")
    if entity.client_id is not None:
        parts.append("default-client-id" if entity.client_id is DEFAULT else "client-id")
    return "+".join(parts) or NO_SOURCE


QUOTA_SOURCES: Final = (
    "user+client-id",
    "user+default-client-id",
    "user",
    "default-user+client-id",
    "default-user+default-client-id",
    "default-user",
    "client-id",
    "default-client-id",
)
"""Kafka's eight levels, in precedence order (docs: "Quotas" in Kafka's operations guide)."""
