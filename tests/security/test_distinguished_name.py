"""Certificate subjects in the form Kafka's mapping rules see: Java's X500Principal.getName().

The expected strings follow the JDK's RFC 2253 writer (``sun.security.x509.AVA``): Kafka's
rules are regular expressions over exactly these strings, so ``cryptography``'s
``rfc4514_string()``, which differs on escaping and on unknown attribute types, would map the
same certificate to another principal.
"""

from __future__ import annotations

import contextlib
import random

import pytest
from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from quotagate.security.der import DerError
from quotagate.security.distinguished_name import certificate_subject
from support.certificates import CertificateAuthority


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("dn"))


def _subject_of(authority: CertificateAuthority, *rdns: x509.RelativeDistinguishedName) -> str:
    """The Java form of a certificate whose subject has ``rdns``, least specific first."""
    return certificate_subject(authority.issue(x509.Name(list(rdns)), "subject").der)


def _rdn(
    oid: x509.ObjectIdentifier, value: str, kind: _ASN1Type | None = None
) -> x509.RelativeDistinguishedName:
    if kind is None:
        return x509.RelativeDistinguishedName([x509.NameAttribute(oid, value)])
    return x509.RelativeDistinguishedName([x509.NameAttribute(oid, value, _type=kind)])


def test_most_specific_first_without_spaces(authority: CertificateAuthority) -> None:
    dn = _subject_of(
        authority,
        _rdn(NameOID.ORGANIZATION_NAME, "corp"),
        _rdn(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
        _rdn(NameOID.COMMON_NAME, "alice"),
    )
    assert dn == "CN=alice,OU=eng,O=corp"


def test_java_escapes_equals_and_hash_anywhere(authority: CertificateAuthority) -> None:
    value = 'a,b+c=d;e<f>g"h\\i#j'
    issued = authority.issue(x509.Name([_rdn(NameOID.COMMON_NAME, value)]), "special")
    assert certificate_subject(issued.der) == 'CN=a\\,b\\+c\\=d\\;e\\<f\\>g\\"h\\\\i\\#j'
    # cryptography's RFC 4514 text differs: no escape for '=' or an inner '#'.
    loaded = x509.load_der_x509_certificate(issued.der)
    assert loaded.subject.rfc4514_string() != certificate_subject(issued.der)


def test_every_leading_and_trailing_space_is_escaped(authority: CertificateAuthority) -> None:
    assert _subject_of(authority, _rdn(NameOID.COMMON_NAME, "  #x  ")) == "CN=\\ \\ \\#x\\ \\ "


def test_nul_is_written_as_backslash_00(authority: CertificateAuthority) -> None:
    assert _subject_of(authority, _rdn(NameOID.COMMON_NAME, "a\x00b")) == "CN=a\\00b"


def test_non_ascii_text_is_kept(authority: CertificateAuthority) -> None:
    assert _subject_of(authority, _rdn(NameOID.COMMON_NAME, "Zoë Ångström")) == "CN=Zoë Ångström"


def test_rfc_2253_keywords_dc_and_uid(authority: CertificateAuthority) -> None:
    dn = _subject_of(
        authority,
        _rdn(NameOID.DOMAIN_COMPONENT, "com"),
        _rdn(NameOID.DOMAIN_COMPONENT, "example"),
        _rdn(NameOID.USER_ID, "jdoe"),
        _rdn(NameOID.STREET_ADDRESS, "Main St"),
        _rdn(NameOID.STATE_OR_PROVINCE_NAME, "MD"),
        _rdn(NameOID.LOCALITY_NAME, "Fulton"),
        _rdn(NameOID.COUNTRY_NAME, "US"),
    )
    assert dn == "C=US,L=Fulton,ST=MD,STREET=Main St,UID=jdoe,DC=example,DC=com"


def test_other_attribute_types_are_oid_and_hex_der(authority: CertificateAuthority) -> None:
    # emailAddress is IA5String "a@b.c": tag 0x16, length 5.
    dn = _subject_of(
        authority,
        _rdn(NameOID.EMAIL_ADDRESS, "a@b.c"),
        _rdn(NameOID.SERIAL_NUMBER, "42"),
        _rdn(NameOID.COMMON_NAME, "svc"),
    )
    assert dn == "CN=svc,2.5.4.5=#13023432,1.2.840.113549.1.9.1=#16056140622e63"


def test_a_value_of_a_type_java_does_not_read_as_text_is_hex(
    authority: CertificateAuthority,
) -> None:
    dn = _subject_of(authority, _rdn(NameOID.COMMON_NAME, "xyz", _ASN1Type.VisibleString))
    assert dn == "CN=#1a0378797a"


def test_multi_valued_rdn_joined_with_plus(authority: CertificateAuthority) -> None:
    rdn = x509.RelativeDistinguishedName(
        [x509.NameAttribute(NameOID.COMMON_NAME, "x"), x509.NameAttribute(NameOID.USER_ID, "y")]
    )
    dn = _subject_of(authority, _rdn(NameOID.ORGANIZATION_NAME, "corp"), rdn)
    assert dn == "CN=x+UID=y,O=corp"


def test_broken_certificates_raise_only_der_error(authority: CertificateAuthority) -> None:
    good = authority.issue(x509.Name([_rdn(NameOID.COMMON_NAME, "alice")]), "fuzzed").der
    cases = [good[:cut] for cut in range(len(good))]
    generator = random.Random(20261125)
    for _ in range(2000):
        damaged = bytearray(good)
        for _ in range(generator.randint(1, 4)):
            damaged[generator.randrange(len(damaged))] = generator.randrange(256)
        cases.append(bytes(damaged))
    cases += [b"", b"\x30", b"\x30\x84\xff\xff\xff\xff", b"\x30\x85" + b"\xff" * 5]
    for case in cases:
        with contextlib.suppress(DerError):
            assert isinstance(certificate_subject(case), str)
