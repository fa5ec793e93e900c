"""Java's ``java.util.regex`` as far as Kafka's mapping rules need it, on Python's ``re``.

Kafka's rules are Java regular expressions and Java replacement strings. Python's ``re``
reads the common subset the same way; this module makes the rest explicit:

* patterns compile with ``re.ASCII``, because Java's ``\\w``, ``\\d``, ``\\s`` and
  case-insensitive matching are ASCII unless a flag says otherwise;
* Java's named groups ``(?<name>...)`` and ``\\k<name>`` become Python's, and ``.`` excludes
  all of Java's line terminators (``\\r``, U+0085, U+2028, U+2029 as well as ``\\n``);
* constructs that Python would read differently, or that only one of the two knows
  (``\\p{..}``, ``\\Q..\\E``, class intersection ``&&``, nested classes, ``\\z``/``\\Z``,
  ``\\h``, ``\\v``, ``\\R``, ``\\G``, octal ``\\0``, ``(?P...)``, ...), are refused with a
  message instead of silently matching something else;
* :func:`replace_all` follows ``Matcher.appendReplacement``'s reading of a replacement: ``$n`` takes
  as many digits as still name a group, ``${name}``, ``\\x`` is a literal ``x``, and the same
  mistakes fail with Java's messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

_REFUSED_ESCAPES: Final = {
    "p": "Unicode classes \\p{...}",
    "P": "Unicode classes \\P{...}",
    "Q": "quoting \\Q...\\E",
    "E": "quoting \\Q...\\E",
    "z": "\\z",
    "Z": "\\Z (Java: before a final line terminator; Python: the very end)",
    "h": "\\h",
    "H": "\\H",
    "v": "\\v (Java: vertical whitespace; Python: one control character)",
    "V": "\\V",
    "R": "\\R",
    "X": "\\X",
    "G": "\\G",
    "e": "\\e",
    "c": "control characters \\cX",
    "0": "octal escapes \\0",
    "N": "\\N",
}


_JAVA_DOT: Final = "[^\n\r\u0085\u2028\u2029]"
"""Java's '.': anything but its line terminators (Python's excludes only '\\n')."""
_DOTALL: Final = re.compile(r"\(\?[a-zA-Z]*s")


class JavaRegexError(ValueError):
    """A pattern or replacement Java would refuse, or that Python would read differently."""


def compile_java(pattern: str) -> re.Pattern[str]:
    """``Pattern.compile(pattern)`` as a Python pattern with the same meaning."""
    translated = _translate(pattern)
    try:
        return re.compile(translated, re.ASCII)
    except re.error as exc:
        raise JavaRegexError(f"invalid regular expression {pattern!r}: {exc}") from None


def _translate(pattern: str) -> str:
    out: list[str] = []
    in_class = False
    index = 0
    length = len(pattern)
    # With DOTALL set inline, '.' is any character in both languages.
    dot = "." if _DOTALL.search(pattern) else _JAVA_DOT
    while index < length:
        char = pattern[index]
        if char == "." and not in_class:
            out.append(dot)
            index += 1
            continue
        if char == "\\":
            if index + 1 == length:
                raise JavaRegexError(f"{pattern!r} ends with an unescaped backslash")
            following = pattern[index + 1]
            if following in _REFUSED_ESCAPES:
                raise JavaRegexError(
                    f"{pattern!r} uses {_REFUSED_ESCAPES[following]}, which the gateway's "
                    "regular expressions do not read as Java does; rewrite the rule without it"
                )
            if following == "k" and not in_class:
                close = pattern.find(">", index)
                if index + 2 >= length or pattern[index + 2] != "<" or close < 0:
                    raise JavaRegexError(f"{pattern!r}: \\k is not followed by <name>")
                out.append(f"(?P={pattern[index + 3 : close]})")
                index = close + 1
                continue
            out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class:
            if char == "[":
                raise JavaRegexError(
                    f"{pattern!r} nests a character class, which Java reads as a union and "
                    "Python as a literal '['; write the union out or escape the '['"
                )
            if char == "&" and pattern.startswith("&&", index):
                raise JavaRegexError(
                    f"{pattern!r} uses class intersection (&&), which Python does not have"
                )
            if char == "]":
                in_class = False
            out.append(char)
            index += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            index += 1
            # A ']' right after '[' or '[^' is a literal in both languages.
            for prefix in ("^", "]"):
                if index < length and pattern[index] == prefix:
                    out.append(prefix)
                    index += 1
            continue
        if char == "(" and pattern.startswith("(?", index):
            if pattern.startswith("(?P", index) or pattern.startswith("(?#", index):
                raise JavaRegexError(f"{pattern!r} uses a Python-only group syntax")
            if pattern.startswith("(?<", index) and not pattern.startswith(("(?<=", "(?<!"), index):
                out.append("(?P<")
                index += 3
                continue
        out.append(char)
        index += 1
    return "".join(out)


def check_replacement(replacement: str, pattern: re.Pattern[str]) -> None:
    """Raise :class:`JavaRegexError` where Java's ``replaceAll`` would throw on any input."""
    _parse(replacement, pattern.groups, pattern.groupindex)


def replace_all(pattern: re.Pattern[str], text: str, replacement: str) -> str:
    """Java's ``text.replaceAll(pattern, replacement)``, empty matches included."""
    pieces = _parse(replacement, pattern.groups, pattern.groupindex)

    def one(match: re.Match[str]) -> str:
        return "".join(
            piece if isinstance(piece, str) else (match.group(piece) or "") for piece in pieces
        )

    return pattern.sub(one, text)


def _parse(replacement: str, group_count: int, group_names: Mapping[str, int]) -> list[str | int]:
    """Literal text and group numbers, in order, as Java reads ``replacement``."""
    pieces: list[str | int] = []
    literal: list[str] = []
    cursor = 0
    length = len(replacement)
    while cursor < length:
        char = replacement[cursor]
        if char == "\\":
            cursor += 1
            if cursor == length:
                raise JavaRegexError("character to be escaped is missing")
            literal.append(replacement[cursor])
            cursor += 1
            continue
        if char != "$":
            literal.append(char)
            cursor += 1
            continue
        cursor += 1
        if cursor == length:
            raise JavaRegexError("Illegal group reference: group index is missing")
        if replacement[cursor] == "{":
            close = replacement.find("}", cursor)
            if close < 0:
                raise JavaRegexError("named capturing group is missing trailing '}'")
            group_name = replacement[cursor + 1 : close]
            if not group_name:
                raise JavaRegexError("named capturing group has 0 length name")
            if group_name not in group_names:
                raise JavaRegexError(f"No group with name {{{group_name}}}")
            number = group_names[group_name]
            cursor = close + 1
        else:
            digit = replacement[cursor]
            if not "0" <= digit <= "9":
                raise JavaRegexError("Illegal group reference")
            number = ord(digit) - 48
            cursor += 1
            # Java keeps taking digits while the longer number still names a group.
            while cursor < length and "0" <= replacement[cursor] <= "9":
                longer = number * 10 + ord(replacement[cursor]) - 48
                if longer > group_count:
                    break
                number = longer
                cursor += 1
            if number > group_count:
                raise JavaRegexError(f"No group {number}")
        if literal:
            pieces.append("".join(literal))
            literal = []
        pieces.append(number)
    if literal:
        pieces.append("".join(literal))
    return pieces
