"""Server-side TLS for SSL and SASL_SSL listeners.

PEM files only (Kafka's ``ssl.keystore.type=PEM``): a certificate chain, its private key
(optionally encrypted), and optionally CA certificates to verify client certificates with
(``ssl.client.auth``).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Literal

ClientAuth = Literal["none", "requested", "required"]

_VERIFY_MODES: dict[str, ssl.VerifyMode] = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(
    certificate_chain: str | Path,
    private_key: str | Path | None = None,
    *,
    key_password: str | None = None,
    truststore: str | Path | None = None,
    client_auth: ClientAuth = "none",
) -> ssl.SSLContext:
    """An SSLContext for a listener; raises (OSError, ssl.SSLError) on unusable material.

    ``private_key`` may be omitted when the key sits in the certificate file.
    """
    if client_auth not in _VERIFY_MODES:
        raise ValueError(f"ssl.client.auth must be one of {', '.join(_VERIFY_MODES)}")
    if client_auth != "none" and truststore is None:
        raise ValueError("ssl.client.auth needs a truststore to verify client certificates")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # Kafka's default ssl.enabled.protocols is TLSv1.2,TLSv1.3.
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(
        str(certificate_chain),
        None if private_key is None else str(private_key),
        password=key_password,
    )
    if truststore is not None:
        context.load_verify_locations(cafile=str(truststore))
    context.verify_mode = _VERIFY_MODES[client_auth]
    return context
