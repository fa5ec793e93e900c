"""Authentication on the gateway's listeners: the seam a connection calls, and SASL behind it.

The connection sees only :class:`Authenticator` (bytes in, :class:`AuthResult` out); SASL
termination (PLAIN, SCRAM-SHA-256/512 against the gateway's credential store) is one
implementation, built from the config by :func:`authenticator_factory`.
"""

from quotagate.gateway.auth.authenticator import (
    ANONYMOUS,
    AuthContext,
    Authenticator,
    AuthenticatorFactory,
    AuthResult,
)
from quotagate.gateway.auth.sasl import SaslAuthenticator, SaslAuthenticatorFactory
from quotagate.gateway.auth.setup import authenticator_factory
from quotagate.security.protocol import SASL_MECHANISMS, SecurityProtocol

__all__ = [
    "ANONYMOUS",
    "SASL_MECHANISMS",
    "AuthContext",
    "AuthResult",
    "Authenticator",
    "AuthenticatorFactory",
    "SaslAuthenticator",
    "SaslAuthenticatorFactory",
    "SecurityProtocol",
    "authenticator_factory",
]
