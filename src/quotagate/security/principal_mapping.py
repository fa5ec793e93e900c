"""Kafka's ``ssl.principal.mapping.rules``: from a certificate's subject DN to a user name.

Same syntax and semantics as Kafka's ``SslPrincipalMapper``: a comma-separated list of
``RULE:pattern/replacement/`` (optionally ending ``L`` or ``U`` to lower- or upper-case the
result) and ``DEFAULT`` (the DN itself); the first rule whose pattern matches the whole DN
wins; no match is an error (the connection is refused). Patterns and replacements are
Java's (``$1``, ``${name}``); see :mod:`quotagate.security.java_regex`. Splitting the list,
the messages for invalid rules and the treatment of back references to groups that do not
exist (they stay literal text, ``$4`` with three groups) are Kafka's.

Unlike Kafka, a replacement that Java would throw on at the first connection (``$x``, a
trailing backslash) is refused here when the rules are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from quotagate.security.java_regex import (
    JavaRegexError,
    check_replacement,
    compile_java,
    replace_all,
)

DEFAULT_RULES: Final = "DEFAULT"

# Kafka's grammar of one rule and of the list (groups: DEFAULT, pattern, replacement, case).
_RULE: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER: Final = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER: Final = re.compile(_RULE, re.ASCII)
_BACK_REFERENCE: Final = re.compile(r"\$(\d+)", re.ASCII)
_INT_MAX: Final = 2_147_483_647


class InvalidRuleError(ValueError):
    """``ssl.principal.mapping.rules`` cannot be used; the message says which rule and why."""


class NoMatchingRuleError(LookupError):
    """No rule maps this DN: Kafka refuses the connection."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    """One rule; ``pattern`` is None for ``DEFAULT``."""

    pattern: re.Pattern[str] | None
    source: str = ""
    replacement: str = ""
    """As Java will read it: Kafka's escaping of back references to missing groups done."""
    written: str = ""
    """The replacement as the rule wrote it, for messages."""
    lower: bool = False
    upper: bool = False

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when this rule does not match the whole DN."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        # As Kafka: replaceAll over the DN, so a pattern that can also match the empty
        # string at the end (".*") replaces twice.
        result = replace_all(self.pattern, distinguished_name, self.replacement)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.source}/{self.written}{case}"


class PrincipalMapper:
    """Kafka's ``SslPrincipalMapper`` over a parsed rule list."""

    def __init__(self, rules: tuple[MappingRule, ...]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None = DEFAULT_RULES) -> PrincipalMapper:
        """Parse ``ssl.principal.mapping.rules``; raises :class:`InvalidRuleError`."""
        parsed = (_parse(rule) for rule in split_rules(DEFAULT_RULES if text is None else text))
        return cls(tuple(rule for rule in parsed if rule is not None))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished_name)
            if mapped is not None:
                return mapped
        raise NoMatchingRuleError(f"No rules apply to {distinguished_name}, rules {self._list()}")

    def _list(self) -> str:
        return "[" + ", ".join(str(rule) for rule in self.rules) + "]"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._list()})"


def split_rules(text: str) -> list[str]:
    """Kafka's splitting of a rule list (empty rules included; the caller skips them)."""
    # Java's String.trim(): every char up to U+0020 at either end.
    trimmed = text.strip("".join(chr(code) for code in range(33)))
    return [match.group(1) for match in _SPLITTER.finditer(trimmed)]


def _parse(rule: str) -> MappingRule | None:
    """One rule of the split list; None for an empty one (Kafka ignores those)."""
    match = _PARSER.match(rule)
    if match is None:
        raise InvalidRuleError(f"Invalid rule: {rule}")
    if match.end() != len(rule):
        raise InvalidRuleError(
            f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`"
        )
    if match.group(1) is not None:
        return MappingRule(None)
    source = match.group(2)
    if source is None:
        return None
    return compile_rule(rule, source, match.group(4), match.group(6))


def compile_rule(rule: str, source: str, replacement: str, case: str) -> MappingRule:
    """One ``RULE:source/replacement/case`` as Kafka reads it; ``rule`` is the whole text,
    for messages. Shared with the tenant rules (quotagate.security.tenant_mapping)."""
    try:
        pattern = compile_java(source)
        escaped = _escape_literal_back_references(replacement, pattern.groups)
        check_replacement(escaped, pattern)
    except JavaRegexError as exc:
        raise InvalidRuleError(f"Invalid rule: `{rule}`: {exc}") from None
    return MappingRule(
        pattern,
        source,
        escaped,
        replacement,
        lower=case == "L",
        upper=case == "U",
    )


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's treatment of ``$n`` naming no group: a backslash makes it literal text.

    Kafka walks the back references of the replacement as written while inserting into the
    copy it builds, so with two or more such references the later backslashes land where
    the original offsets say; the result is reproduced exactly, oddities included.
    """
    if groups == 0:
        return replacement
    value = replacement
    for reference in _BACK_REFERENCE.finditer(replacement):
        digits = reference.group(1)
        if digits.startswith("0"):
            continue
        number = int(digits)
        if number > _INT_MAX:
            raise JavaRegexError(f'For input string: "{digits}"')
        while number > groups and number >= 10:
            number //= 10
        if number > groups:
            start = reference.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value
