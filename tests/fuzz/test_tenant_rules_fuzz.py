"""``tenant.mapping.rules``, fuzzed: the parser is total and the mapping never raises.

The rules arrive over the wire (IncrementalAlterConfigs from any super user) and from the
config file, so the parser must answer every text with a mapper or ``InvalidRuleError``,
nothing else; rules drawn from the grammar parse, print back to what parses the same, and map
every (user, client id) to a string without raising.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from fuzz.budget import Budget, run_examples
from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper

_PATTERN = st.text(st.sampled_from("^$.*+?()[]{}|\\/,abcXZ09-_:= \t$1"), max_size=16)
_REPLACEMENT = st.text(st.sampled_from("$1${}ab\\/-_ "), max_size=8)
_NAME = st.text(st.sampled_from("abcXZ09-_:=,. \\/$"), max_size=16)
_RULE = st.builds(
    lambda target, pattern, replacement, case: f"RULE:{target}:{pattern}/{replacement}/{case}",
    st.sampled_from(["user", "client-id", "users", "client", ""]),
    _PATTERN,
    _REPLACEMENT,
    st.sampled_from(["", "L", "U", "X", "/L"]),
)
_RULES = st.lists(st.one_of(_RULE, _NAME, st.just("DEFAULT")), max_size=4).map(",".join)


def _parse_or_refuse(text: str) -> TenantMapper | None:
    try:
        return TenantMapper.from_rules(text)
    except InvalidRuleError as refused:
        assert str(refused).startswith("Invalid rule")
        return None


def test_rule_lists_parse_or_are_refused_and_mapping_is_total(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        text = data.draw(_RULES)
        mapper = _parse_or_refuse(text)
        if mapper is None:
            return
        reparsed = TenantMapper.from_rules(str(mapper))
        assert str(reparsed) == str(mapper)
        for _ in range(3):
            user, client_id = data.draw(_NAME), data.draw(_NAME)
            tenant = mapper.tenant(user, client_id)
            assert isinstance(tenant, str)
            assert reparsed.tenant(user, client_id) == tenant

    run_examples(body, max(budget.round_trip_examples * 100, 200), budget, "tenant_rules")


def test_damaged_rules_are_refused_or_read(budget: Budget) -> None:
    rng = random.Random(25)
    seed = "RULE:user:^(.*)-svc$/$1/L,RULE:client-id:^team-([a-z]+)-.*$/$1/"
    cases = [seed[:cut] for cut in range(len(seed))]
    for _ in range(min(budget.cases, 2000)):
        chars = list(seed)
        for _ in range(rng.randint(1, 4)):
            chars[rng.randrange(len(chars))] = chr(rng.randrange(1, 0x300))
        cases.append("".join(chars))
    for text in cases:
        mapper = _parse_or_refuse(text)
        if mapper is not None:
            assert isinstance(mapper.tenant("a-svc", "team-x-1"), str)
