"""``tenant.mapping.rules``: which tenant a request belongs to, from its user and client id.

A comma-separated list of ``RULE:user:PATTERN/REPLACEMENT/`` and
``RULE:client-id:PATTERN/REPLACEMENT/`` (each optionally ending ``L`` or ``U``, as Kafka's
``ssl.principal.mapping.rules``). ``user`` rules match the user name (the principal without
``User:``), ``client-id`` rules the raw client id. The list is split, and each pattern and
replacement read, exactly as Kafka's ``SslPrincipalMapper`` does (this module shares its
grammar: :mod:`quotagate.security.principal_mapping`): a rule applies when its pattern
matches the *whole* name, the replacement is Java's (``$1``, ``${name}``), and the first rule
that applies names the tenant. No rule applying means no tenant, and so does a rule whose
replacement comes out empty. ``DEFAULT`` has no meaning here and is refused.

Pure: text in, names out. The gateway keeps the rules in its store and asks
:meth:`TenantMapper.tenant` for each new (user, client id); the answer is cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from quotagate.security.principal_mapping import (
    InvalidRuleError,
    MappingRule,
    compile_rule,
    split_rules,
)

USER: Final = "user"
CLIENT_ID: Final = "client-id"
TENANT_MAPPING_RULES: Final = "tenant.mapping.rules"

_RULE: Final = re.compile(
    r"RULE:(user|client-id):((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)", re.ASCII
)
_CACHE_MAX: Final = 4096
_EXAMPLE: Final = "RULE:user:^(.*)-svc$/$1/,RULE:client-id:^team-([a-z]+)-.*$/$1/"

__all__ = ["InvalidRuleError", "TenantMapper", "TenantRule"]


@dataclass(frozen=True, slots=True)
class TenantRule:
    """One rule: what it matches (``user`` or ``client-id``) and Kafka's rule on it."""

    target: str
    rule: MappingRule

    def apply(self, user: str, client_id: str) -> str | None:
        return self.rule.apply(user if self.target == USER else client_id)

    def __str__(self) -> str:
        # As written, so that it reads back the same (Kafka's toString drops the last '/').
        rule = self.rule
        case = "L" if rule.lower else "U" if rule.upper else ""
        return f"RULE:{self.target}:{rule.source}/{rule.written}/{case}"


class TenantMapper:
    """The parsed ``tenant.mapping.rules``; :meth:`tenant` is the mapping."""

    __slots__ = ("_cache", "rules")

    def __init__(self, rules: tuple[TenantRule, ...] = ()) -> None:
        self.rules = rules
        self._cache: dict[tuple[str, str], str] = {}

    @classmethod
    def from_rules(cls, text: str | None) -> TenantMapper:
        """Parse the list; raises :class:`InvalidRuleError` naming the rule and the fix."""
        if not text:
            return cls()
        return cls(tuple(_parse(rule) for rule in split_rules(text) if rule))

    def tenant(self, user: str, client_id: str) -> str:
        """The tenant of a request, "" for none: the first rule that applies names it."""
        key = (user, client_id)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        tenant = ""
        for rule in self.rules:
            mapped = rule.apply(user, client_id)
            if mapped is not None:
                tenant = mapped
                break
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()  # keyed by what clients send: never let it grow
        self._cache[key] = tenant
        return tenant

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __str__(self) -> str:
        return ",".join(str(rule) for rule in self.rules)


def _parse(rule: str) -> TenantRule:
    if rule == "DEFAULT":
        raise InvalidRuleError(
            f"Invalid rule: {rule}: {TENANT_MAPPING_RULES} has no DEFAULT (a request no rule "
            f"matches has no tenant); write rules such as {_EXAMPLE}"
        )
    match = _RULE.fullmatch(rule)
    if match is None:
        raise InvalidRuleError(
            f"Invalid rule: {rule}: each rule of {TENANT_MAPPING_RULES} is "
            f"RULE:user:PATTERN/REPLACEMENT/ or RULE:client-id:PATTERN/REPLACEMENT/ "
            f"(optionally ending L or U), e.g. {_EXAMPLE}"
        )
    target, source, replacement, case = match.groups()
    return TenantRule(target, compile_rule(rule, source, replacement, case))
