"""Quota entities, the eight-level resolution and sharing keys (Kafka's default quota callback).

An entity is a (user, client-id) pair where each part is a name, ``DEFAULT`` (the
``<default>`` entity) or ``None`` (not part of the entity). Which clients share one rate is
decided by *sharing keys* (Kafka's metric tags): a pair of strings where "" means "this level
is not in the key". Which levels can appear depends on which kinds of entity have ever been
configured, a sticky set that only a restart clears.

Redpanda's ``client-id-prefix`` entities add three levels to Kafka's eight (its "About Client
Throughput Quotas"): the client part of an entity may be a :class:`ClientIdPrefix`, which
matches every client id starting with it. The clients it matches share one rate (within one
user for ``user + prefix``, across all users for a prefix alone), under the sharing key
``(user, prefix + "*")``. An exact client id outranks a prefix at the same user level, and a
prefix outranks the default client id; of several matching prefixes the longest wins (our
choice: Redpanda does not say). docs/quotas.md has the twelve levels.
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


@dataclass(frozen=True, slots=True)
class ClientIdPrefix:
    """The client part of a ``client-id-prefix`` entity: every client id starting with it."""

    prefix: str

    def matches(self, client_id: str) -> bool:
        return client_id.startswith(self.prefix)

    @property
    def key(self) -> str:
        """The client part of the sharing key of the clients it matches."""
        return self.prefix + PREFIX_KEY_MARK


PREFIX_KEY_MARK: Final = "*"
"""Ends the client part of a prefix's sharing key (``bar-*`` for prefix ``bar-``)."""

EntityName: TypeAlias = str | _Default | ClientIdPrefix | None
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
        if isinstance(self.client_id, ClientIdPrefix):
            return USER_PREFIX_QUOTAS if self.user is not None else PREFIX_QUOTAS
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
        if isinstance(self.client_id, ClientIdPrefix):
            parts.append(f"client-id-prefix/{self.client_id.prefix}")
        elif self.client_id is not None:
            parts.append(f"clients/{'<default>' if self.client_id is DEFAULT else self.client_id}")
        return "/".join(parts) or "<empty>"


NO_QUOTAS: Final = 0
CLIENT_ID_QUOTAS: Final = 1
USER_QUOTAS: Final = 2
USER_CLIENT_ID_QUOTAS: Final = 4
PREFIX_QUOTAS: Final = 8
USER_PREFIX_QUOTAS: Final = 16
_SINGLE_KINDS: Final = frozenset({NO_QUOTAS, CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS})


class QuotaLimits:
    """The configured quotas of one quota type and the set of enabled kinds.

    As Kafka 4.3's ``ClientQuotaManager.updateQuotaTypes``: a kind is enabled while at least
    one entity of that kind has a quota (Kafka counts them), so removing the last one turns
    the kind off again (before 4.x the bits stayed set until the broker restarted).
    """

    __slots__ = ("_limits", "_prefixes", "kinds_enabled")

    def __init__(self) -> None:
        self._limits: dict[QuotaEntity, float] = {}
        self._prefixes: tuple[ClientIdPrefix, ...] = ()
        """The configured prefixes, longest first: the first that matches is the one."""
        self.kinds_enabled = NO_QUOTAS

    def set(self, entity: QuotaEntity, value: float | None) -> None:
        if value is None:
            self._limits.pop(entity, None)
        else:
            self._limits[entity] = value
        kinds = NO_QUOTAS
        for configured in self._limits:
            kinds |= configured.kind
        self.kinds_enabled = kinds
        if isinstance(entity.client_id, ClientIdPrefix):
            prefixes = {
                e.client_id for e in self._limits if isinstance(e.client_id, ClientIdPrefix)
            }
            self._prefixes = tuple(sorted(prefixes, key=lambda p: (-len(p.prefix), p.prefix)))

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
        if kinds & (PREFIX_QUOTAS | USER_PREFIX_QUOTAS):
            return self._sharing_key_with_prefixes(user, client_id)
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

    def _sharing_key_with_prefixes(self, user: str, client_id: str) -> SharingKey:
        """Redpanda's twelve levels: a prefix right after the exact client id of its level."""
        limits = self._limits
        prefix = next((p for p in self._prefixes if p.matches(client_id)), None)
        for entity_user in (user, DEFAULT):
            if QuotaEntity(entity_user, client_id) in limits:
                return (user, client_id)
            if prefix is not None:
                for candidate in self._prefixes:
                    if (
                        candidate.matches(client_id)
                        and QuotaEntity(entity_user, candidate) in limits
                    ):
                        return (user, candidate.key)
            if QuotaEntity(entity_user, DEFAULT) in limits:
                return (user, client_id)
            if QuotaEntity(entity_user, None) in limits:
                return (user, "")
        if QuotaEntity(None, client_id) in limits:
            return ("", client_id)
        if prefix is not None:
            for candidate in self._prefixes:
                if candidate.matches(client_id) and QuotaEntity(None, candidate) in limits:
                    return ("", candidate.key)
        return ("", client_id)

    def limit_for_key(self, key: SharingKey) -> float | None:
        """The quota that applies to a sharing key, or None when nothing is configured."""
        limits = self._limits
        for entity in self._candidates(key):
            value = limits.get(entity)
            if value is not None:
                return value
        return None

    def source_for_key(self, key: SharingKey) -> QuotaEntity | None:
        """The configured entity whose quota applies to a sharing key (its level), if any."""
        limits = self._limits
        for entity in self._candidates(key):
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

    def _candidates(self, key: SharingKey) -> tuple[QuotaEntity, ...]:
        """The entities that may configure a sharing key, most specific first; a prefix's
        key (``bar-*``) is configured by that prefix only, as its user or the default user's."""
        user, client_id = key
        if self._prefixes and client_id.endswith(PREFIX_KEY_MARK):
            prefix = ClientIdPrefix(client_id[: -len(PREFIX_KEY_MARK)])
            if prefix in self._prefixes:
                if user:
                    return (QuotaEntity(user, prefix), QuotaEntity(DEFAULT, prefix))
                return (QuotaEntity(None, prefix),)
        return _candidates(key)


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
    if isinstance(entity.client_id, ClientIdPrefix):
        parts.append("client-id-prefix")
    elif entity.client_id is not None:
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

PREFIX_SOURCES: Final = (
    "user+client-id-prefix",
    "default-user+client-id-prefix",
    "client-id-prefix",
)
"""Redpanda's three prefix levels (its levels 2, 6 and 10), which sit right after the exact
client id of the same user level."""
