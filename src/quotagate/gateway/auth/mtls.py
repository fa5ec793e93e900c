"""A TLS client's principal, read from its verified certificate when the connection opens.

Only SSL listeners with ``ssl.client.auth`` requested or required ask for one: on SASL_SSL
the SASL exchange names the principal (as in Kafka), and a listener that does not request
certificates has none to read.
"""

from __future__ import annotations

import asyncio
import ssl

from quotagate.gateway.config import ListenerConfig
from quotagate.security.principal import PrincipalBuilder
from quotagate.security.principal_mapping import PrincipalMapper
from quotagate.security.protocol import SecurityProtocol


def certificate_principals(listener: ListenerConfig) -> PrincipalBuilder | None:
    """The builder of an SSL listener that verifies client certificates, else None."""
    if listener.security_protocol != SecurityProtocol.SSL or listener.ssl_client_auth == "none":
        return None
    return PrincipalBuilder(PrincipalMapper.from_rules(listener.ssl_principal_mapping_rules))


def peer_certificate(transport: asyncio.BaseTransport) -> bytes | None:
    """The DER leaf certificate the TLS handshake verified, None when the client sent none."""
    ssl_object = transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    return ssl_object.getpeercert(binary_form=True)
