"""Kafka's security vocabulary, written once: ``security.protocol`` and the SASL mechanism names.

Listeners, the upstream client, SASL passthrough and the credential store all spell these
names; they live on the lowest floor so that none of them has to import another to agree.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT_MECHANISMS",
    "OAUTHBEARER",
    "PLAIN",
    "SASL_MECHANISMS",
    "SCRAM_MECHANISMS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SUPPORTED_SASL_MECHANISMS",
    "SecurityProtocol",
]


class SecurityProtocol:
    """Kafka's ``security.protocol`` names, for a listener and for the upstream alike."""

    PLAINTEXT: Final = "PLAINTEXT"
    SSL: Final = "SSL"
    SASL_PLAINTEXT: Final = "SASL_PLAINTEXT"
    SASL_SSL: Final = "SASL_SSL"

    ALL: Final = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
    SASL: Final = (SASL_PLAINTEXT, SASL_SSL)
    TLS: Final = (SSL, SASL_SSL)


PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"
OAUTHBEARER: Final = "OAUTHBEARER"

SCRAM_MECHANISMS: Final = (SCRAM_SHA_256, SCRAM_SHA_512)
SASL_MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS)
"""The SASL mechanisms a listener enables by default (``sasl.enabled.mechanisms``)."""
SUPPORTED_SASL_MECHANISMS: Final = (*SASL_MECHANISMS, OAUTHBEARER)
"""The SASL mechanisms the gateway can terminate; OAUTHBEARER needs a JWKS endpoint."""
CLIENT_MECHANISMS: Final = SUPPORTED_SASL_MECHANISMS
"""The SASL mechanisms the gateway can speak as a client to its upstream (the same four)."""
