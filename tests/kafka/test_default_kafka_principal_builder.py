"""The SSL cases of Kafka's ``DefaultKafkaPrincipalBuilderTest`` as vectors, on real certificates.

Kafka's test hands the builder ``X500Principal`` objects made from DN strings; here each
string becomes the subject of a certificate signed by a CA the test makes, and the builder
reads the certificate's DER, which is what the gateway has at a TLS handshake. The expected
names are Kafka's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quotagate.security.principal import ANONYMOUS, PrincipalBuilder
from quotagate.security.principal_mapping import PrincipalMapper
from support.certificates import CertificateAuthority

RULES = ", ".join(
    (
        "RULE:^CN=(.*),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*),OU=(.*),O=(.*),L=(.*),ST=(.*),C=(.*)$/$1@$2/L",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    )
)

# Kafka writes the DNs with a space after each comma; X500Principal.getName() drops it.
CASES = (
    ("CN=Duke, OU=ServiceUsers, O=Org, C=US", "User:duke"),
    ("CN=Duke, OU=SME, O=mycp, L=Fulton, ST=MD, C=US", "User:duke@sme"),
    ("CN=duke, OU=JavaSoft, O=Sun Microsystems", "User:DUKE"),
    ("OU=JavaSoft, O=Sun Microsystems, C=US", "User:OU=JavaSoft,O=Sun Microsystems,C=US"),
)


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("principal-builder"))


@pytest.mark.parametrize(("dn", "principal"), CASES)
def test_principal_with_ssl_principal_mapper(
    authority: CertificateAuthority, dn: str, principal: str
) -> None:
    issued = authority.client(dn.replace(", ", ","), "client")
    builder = PrincipalBuilder(PrincipalMapper.from_rules(RULES))
    assert builder.from_certificate(issued.der) == principal


def test_principal_if_ssl_peer_is_not_authenticated(tmp_path: Path) -> None:
    assert PrincipalBuilder(PrincipalMapper.from_rules(RULES)).from_certificate(None) == ANONYMOUS


def test_default_rules_give_the_whole_dn(authority: CertificateAuthority) -> None:
    issued = authority.client("CN=alice,OU=eng,O=corp", "alice")
    assert PrincipalBuilder().from_certificate(issued.der) == "User:CN=alice,OU=eng,O=corp"


def test_sasl_principal_is_the_authorization_id() -> None:
    # testPrincipalBuilderScram: the SASL server's authorization id, as a User.
    assert PrincipalBuilder.from_sasl("foo") == "User:foo"
