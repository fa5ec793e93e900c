"""Certificates made by the tests: a CA, server certificates for loopback, client certificates.

Made with ``cryptography`` (EC P-256, a day of validity), written as PEM files into a
directory the test owns, so every TLS test runs on material nobody else has.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Leaf:
    certificate: Path
    key: Path
    combined: Path
    """Certificate then key in one PEM file (what haproxy's ``crt`` takes)."""
    der: bytes

    def listener_fields(self, **extra: Any) -> dict[str, Any]:
        """ListenerConfig fields of a TLS listener serving this certificate, and ``extra``."""
        return {
            "ssl_certificate_location": str(self.certificate),
            "ssl_key_location": str(self.key),
            **extra,
        }


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def subject(rfc4514: str) -> x509.Name:
    """A Name from its string form, most specific RDN first (as Java and RFC 4514 write it)."""
    return x509.Name.from_rfc4514_string(rfc4514)


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "quotagate test CA") -> None:
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name(name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.certificate = directory / f"{name.replace(' ', '-')}.pem"
        """The CA's own certificate (what ``ssl.ca.location`` names)."""
        self.certificate.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        name: str | x509.Name,
        file_name: str | None = None,
        *,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        usage: x509.ObjectIdentifier | None = None,
    ) -> Leaf:
        """A leaf for ``name`` (a common name, or a whole subject); files named ``file_name``
        (the common name when not given); ``usage`` an extended key usage, if any."""
        if file_name is None:
            if not isinstance(name, str):
                raise ValueError("a subject Name needs a file_name")
            file_name = name.replace(" ", "-")
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(name) if isinstance(name, str) else name)
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        alt_names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        alt_names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        if usage is not None:
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        stem = self.directory / file_name
        cert_pem, key_pem = cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)
        leaf = Leaf(
            Path(f"{stem}.crt"),
            Path(f"{stem}.key"),
            Path(f"{stem}.combined.pem"),
            cert.public_bytes(serialization.Encoding.DER),
        )
        leaf.certificate.write_bytes(cert_pem)
        leaf.key.write_bytes(key_pem)
        leaf.combined.write_bytes(cert_pem + key_pem)
        return leaf

    def server(self, file_name: str = "gateway") -> Leaf:
        """``CN=localhost`` for ``localhost`` and ``127.0.0.1``, for server use."""
        return self.issue(
            "localhost",
            file_name,
            dns=("localhost",),
            ips=("127.0.0.1",),
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
        )

    def client(self, rfc4514: str, file_name: str) -> Leaf:
        """A client certificate whose subject DN is ``rfc4514``."""
        return self.issue(subject(rfc4514), file_name, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
