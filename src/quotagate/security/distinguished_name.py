"""A certificate's subject as Kafka sees it: Java's ``X500Principal.getName()`` (RFC 2253).

Kafka's principal mapping rules are regular expressions over this exact string, so it must
be Java's, byte for byte, not any RFC 2253/4514 rendering. Where Java differs from the
RFCs' minimum, and from ``cryptography``'s ``rfc4514_string()``:

* ``=`` and ``#`` are escaped wherever they occur (RFC 4514 asks only for a leading ``#``);
* every leading and trailing space (and carriage return) is escaped, not one at each end;
* attribute types other than CN, C, L, ST, O, OU, STREET, DC and UID are written as dotted
  OIDs and their values as ``#`` and the hex of their whole DER encoding (``cryptography``
  writes the text: ``emailAddress`` differs);
* values of other than the directory-string types Java knows (PrintableString, T61String,
  IA5String, GeneralString, BMPString, UTF8String) are hex too (VisibleString is);
* string contents are decoded as UTF-8 whatever their tag, as the JDK does.

The subject is read from the certificate's own DER bytes, so the order of RDNs (last
first) and of the values inside a multi-valued RDN (encoded order) are the encoding's.
"""

from __future__ import annotations

from typing import Final

from quotagate.security import der

_KEYWORDS: Final = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
"""The attribute types Java names with a keyword in RFC 2253 form."""

_STRING_TAGS: Final = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
"""UTF8String, PrintableString, T61String, IA5String, GeneralString, BMPString."""

_ESCAPED: Final = frozenset(',=+<>#;"\\')
_EDGE_WHITESPACE: Final = frozenset(" \r")


def certificate_subject(certificate: bytes) -> str:
    """The subject DN of a DER certificate, as Java's ``X500Principal.getName()``.

    Raises :class:`~quotagate.security.der.DerError` on bytes that are not a certificate.
    """
    outer = der.expect(certificate, 0, len(certificate), der.SEQUENCE)
    tbs = der.expect(certificate, outer.content, outer.end, der.SEQUENCE)
    fields = der.children(certificate, tbs)
    first = 1 if fields and fields[0].tag == der.CONTEXT_0 else 0
    # version?, serialNumber, signature, issuer, validity, subject
    if len(fields) < first + 5:
        raise der.DerError("certificate has no subject")
    subject = fields[first + 4]
    if subject.tag != der.SEQUENCE:
        raise der.DerError("certificate subject is not a Name")
    return _name(certificate, subject)


def name(encoded: bytes) -> str:
    """A DER-encoded Name (``SEQUENCE OF RelativeDistinguishedName``) in Java's RFC 2253 form."""
    return _name(encoded, der.expect(encoded, 0, len(encoded), der.SEQUENCE))


def _name(data: bytes, sequence: der.Tlv) -> str:
    rdns = []
    for rdn in der.children(data, sequence):
        if rdn.tag != der.SET:
            raise der.DerError("a relative distinguished name is not a SET")
        rdns.append("+".join(_attribute(data, ava) for ava in der.children(data, rdn)))
    return ",".join(reversed(rdns))


def _attribute(data: bytes, ava: der.Tlv) -> str:
    if ava.tag != der.SEQUENCE:
        raise der.DerError("an attribute is not a SEQUENCE")
    parts = der.children(data, ava)
    if len(parts) != 2 or parts[0].tag != der.OBJECT_IDENTIFIER:
        raise der.DerError("an attribute is not (type, value)")
    oid = der.object_identifier(data, parts[0])
    value = parts[1]
    keyword = _KEYWORDS.get(oid)
    if keyword is None or value.tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{data[value.start : value.end].hex()}"
    text = data[value.content : value.end].decode("utf-8", errors="replace")
    return f"{keyword}={_escape(text)}"


def _escape(text: str) -> str:
    chars: list[str] = []
    for char in text:
        if char in _ESCAPED:
            chars.append("\\" + char)
        elif char == "\x00":
            chars.append("\\00")
        else:
            chars.append(char)
    flat = "".join(chars)
    # Java escapes whitespace at both ends of the already escaped text, every such char.
    lead = 0
    while lead < len(flat) and flat[lead] in _EDGE_WHITESPACE:
        lead += 1
    trail = len(flat) - 1
    while trail >= 0 and flat[trail] in _EDGE_WHITESPACE:
        trail -= 1
    return "".join(
        "\\" + char if index < lead or index > trail else char for index, char in enumerate(flat)
    )
