"""Authentication on the gateway's listeners: one authenticator per connection, chosen once
per listener (:mod:`quotagate.gateway.auth.listener`: anonymous, certificate, SASL terminated,
SASL passed through), and SASL termination behind :class:`Authenticator` (bytes in,
:class:`AuthResult` out): PLAIN, SCRAM-SHA-256/512 against the gateway's credential store and
OAUTHBEARER, built from the config by :func:`authenticator_factory`. The gateway's own SASL
client, towards its upstream, lives in :mod:`quotagate.gateway.upstream`.
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
