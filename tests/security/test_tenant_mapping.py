"""``tenant.mapping.rules`` with Kafka's ``SslPrincipalMapperTest`` vectors as facts.

The same patterns, replacements and names as Kafka's test, written as ``RULE:user:`` and
``RULE:client-id:`` rules: the tenant is what Kafka's mapper would name; where Kafka's list
ends in ``DEFAULT`` (the name itself) the tenant rules have none, and the name maps to no
tenant.
"""

from __future__ import annotations

import pytest

from quotagate.security.tenant_mapping import InvalidRuleError, TenantMapper
from support.ssl_mapper_vectors import INVALID as SSL_INVALID
from support.ssl_mapper_vectors import VALID as SSL_VALID

# SslPrincipalMapperTest.testValidRules, DEFAULT aside.
VALID = tuple(rules for rules in SSL_VALID if not rules.endswith("DEFAULT"))
# testInvalidRules' RULE lines, rewritten for both targets.
INVALID = tuple(rules for rules in SSL_INVALID if rules.lower().startswith("rule:"))


def _on(target: str, rule: str) -> str:
    """Kafka's ``RULE:...`` as a tenant rule on ``target`` (a lower-case ``rule:`` stays)."""
    return rule.replace("RULE:", f"RULE:{target}:", 1)


@pytest.mark.parametrize("target", ["user", "client-id"])
@pytest.mark.parametrize("rule", VALID)
def test_kafkas_valid_rules_are_valid(target: str, rule: str) -> None:
    assert len(TenantMapper.from_rules(_on(target, rule)).rules) == 1


@pytest.mark.parametrize("target", ["user", "client-id"])
@pytest.mark.parametrize("rule", INVALID)
def test_kafkas_invalid_rules_are_invalid(target: str, rule: str) -> None:
    with pytest.raises(InvalidRuleError, match=r"^Invalid rule"):
        TenantMapper.from_rules(_on(target, rule))


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^(.*)$/$1/",  # no target
        "RULE:users:^(.*)$/$1/",
        "RULE:principal:^(.*)$/$1/",
        "RULE:user:^(.*$/$1/",  # Java refuses the pattern
        "RULE:user:^(.*)$/$x/",  # and the replacement
    ],
)
def test_other_mistakes_are_refused_with_the_grammar(rules: str) -> None:
    with pytest.raises(InvalidRuleError, match=r"^Invalid rule"):
        TenantMapper.from_rules(rules)


NAMES = {
    # testSslPrincipalMapper: name -> what Kafka's mapper names it.
    "CN=Duke,OU=ServiceUsers,O=Org,C=US": "duke",
    "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
    "cn=duke,ou=sme,dc=mycp,dc=com": "DUKE@SME",
    "cN=duke,OU=JavaSoft,O=Sun Microsystems": "DUKE",
    "OU=JavaSoft,O=Sun Microsystems,C=US": "",  # Kafka's DEFAULT; here no tenant
}
KAFKA_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
)


@pytest.mark.parametrize("target", ["user", "client-id"])
def test_kafkas_mapping_vectors(target: str) -> None:
    mapper = TenantMapper.from_rules(", ".join(_on(target, rule) for rule in KAFKA_RULES))
    for name, tenant in NAMES.items():
        user, client_id = (name, "x") if target == "user" else ("x", name)
        assert mapper.tenant(user, client_id) == tenant


def test_comma_with_whitespace() -> None:
    """testCommaWithWhitespace: an escaped comma inside a pattern does not split the list."""
    mapper = TenantMapper.from_rules("RULE:user:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/")
    assert mapper.tenant("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz", "") == "Tkac\\, Adam"


def test_first_applying_rule_wins_across_targets() -> None:
    mapper = TenantMapper.from_rules(
        "RULE:client-id:^billing-.*$/billing/, RULE:user:^(.*)-svc$/$1/, RULE:user:^ops-(.*)$/ops/"
    )
    assert mapper.tenant("search-svc", "billing-7") == "billing"
    assert mapper.tenant("search-svc", "other") == "search"
    assert mapper.tenant("ops-search-svc", "x") == "ops-search"  # the earlier rule
    assert mapper.tenant("ops-1", "x") == "ops"
    assert mapper.tenant("alice", "x") == ""


def test_a_pattern_must_match_the_whole_name() -> None:
    mapper = TenantMapper.from_rules("RULE:user:svc/x/")
    assert mapper.tenant("svc", "") == "x"
    assert mapper.tenant("my-svc", "") == ""


def test_an_empty_replacement_and_an_empty_list_name_no_tenant() -> None:
    assert TenantMapper.from_rules("RULE:user:^(.*)$//").tenant("alice", "c") == ""
    assert TenantMapper.from_rules("").tenant("alice", "c") == ""
    assert not TenantMapper.from_rules(" , ")


def test_the_rules_print_back_as_they_read() -> None:
    text = "RULE:user:^(.*)-svc$/$1/L,RULE:client-id:^([a-z]+)-.*$/team-$1/"
    assert str(TenantMapper.from_rules(text)) == text
