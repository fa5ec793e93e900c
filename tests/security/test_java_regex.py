"""Java's replacement strings (``Matcher.appendReplacement``) and patterns read alike."""

from __future__ import annotations

import pytest

from quotagate.security.java_regex import JavaRegexError, compile_java, replace_all


@pytest.mark.parametrize(
    ("pattern", "text", "replacement", "expected"),
    [
        ("(a)(b)", "ab", "$2$1", "ba"),
        # $12, one group: group 1 then a literal 2 (Java takes digits while they name a group).
        ("(a)", "a", "$12", "a2"),
        ("(?<first>a)b", "ab", "${first}!", "a!"),
        ("(a)", "a", "\\$1", "$1"),
        ("(a)(x)?", "a", "[$2]", "[]"),  # a group that did not take part adds nothing
        (".*", "abc", "x", "xx"),  # replaceAll also replaces the empty match at the end
        ("\\w+", "é", "x", "é"),  # \w is ASCII in Java
    ],
)
def test_replacement_as_java_reads_it(
    pattern: str, text: str, replacement: str, expected: str
) -> None:
    assert replace_all(compile_java(pattern), text, replacement) == expected


@pytest.mark.parametrize(
    ("replacement", "message"),
    [
        ("$", "group index is missing"),
        ("$x", "Illegal group reference"),
        ("$2", "No group 2"),
        ("${nope}", "No group with name {nope}"),
        ("${a", "missing trailing '}'"),
        ("a\\", "character to be escaped is missing"),
    ],
)
def test_replacements_java_throws_on(replacement: str, message: str) -> None:
    with pytest.raises(JavaRegexError, match=message.replace("{", "\\{").replace("}", "\\}")):
        replace_all(compile_java("(?<a>a)"), "a", replacement)


def test_named_back_reference_inside_the_pattern() -> None:
    assert compile_java("(?<x>a)\\k<x>").fullmatch("aa") is not None


def test_dot_stops_at_every_java_line_terminator() -> None:
    for terminator in "\n\r\u0085\u2028\u2029":
        assert compile_java("^CN=(.*)$").fullmatch(f"CN=a{terminator}b") is None
        assert compile_java("(?s)^CN=(.*)$").fullmatch(f"CN=a{terminator}b") is not None
    assert compile_java("[.]").fullmatch(".") is not None  # a dot in a class stays a dot
    assert compile_java("a\\.b").fullmatch("a.b") is not None
