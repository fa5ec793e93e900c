"""Kafka's ``SslPrincipalMapperTest`` (``org.apache.kafka.common.security.ssl``) as vectors.

Every input and expected output is Kafka's; ``str(mapper)`` is ``SslPrincipalMapper.toString()``,
which Kafka's splitting test compares.
"""

from __future__ import annotations

import pytest

from quotagate.security.principal_mapping import (
    InvalidRuleError,
    NoMatchingRuleError,
    PrincipalMapper,
)
from support.ssl_mapper_vectors import INVALID, VALID


@pytest.mark.parametrize("rules", VALID)
def test_valid_rules(rules: str) -> None:
    PrincipalMapper.from_rules(rules)


@pytest.mark.parametrize("rules", INVALID)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(InvalidRuleError, match=r"^Invalid rule"):
        PrincipalMapper.from_rules(rules)


def test_ssl_principal_mapper() -> None:
    mapper = PrincipalMapper.from_rules(
        ", ".join(
            (
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            )
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


SPLITTING = (
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    (
        "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
        "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
    ),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    # rules rule
    (
        "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
        "/DEFAULT, DEFAULT]",
        "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
        "/DEFAULT/,DEFAULT",
    ),
)


@pytest.mark.parametrize(("expected", "rules"), SPLITTING)
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(PrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace() -> None:
    mapper = PrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_matching_rule_names_the_dn_and_the_rules() -> None:
    # getName's NoMatchingRule, whose message Kafka builds from the DN and the rule list.
    mapper = PrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
    with pytest.raises(NoMatchingRuleError) as refused:
        mapper.name("CN=Duke,OU=Sales,O=Org")
    assert str(refused.value) == (
        "No rules apply to CN=Duke,OU=Sales,O=Org, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L]"
    )
