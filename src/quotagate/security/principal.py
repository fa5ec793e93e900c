"""The principal builder: who a connection is, as Kafka's ``DefaultKafkaPrincipalBuilder``.

* SASL (terminated): ``User:`` and the authorization id the mechanism settled on; on
  SASL_SSL this wins over any client certificate, as in Kafka.
* SSL with a verified client certificate: ``User:`` and the certificate's subject DN (Java's
  RFC 2253 form) mapped through ``ssl.principal.mapping.rules``.
* SSL without one (``ssl.client.auth`` none, or requested and not sent), and PLAINTEXT:
  ``User:ANONYMOUS``.
"""

from __future__ import annotations

from typing import Final

from quotagate.security.der import DerError
from quotagate.security.distinguished_name import certificate_subject
from quotagate.security.principal_mapping import NoMatchingRuleError, PrincipalMapper

ANONYMOUS: Final = "User:ANONYMOUS"
USER_TYPE: Final = "User"


class PrincipalError(Exception):
    """No principal can be built: the connection must be refused."""


class PrincipalBuilder:
    def __init__(self, mapper: PrincipalMapper | None = None) -> None:
        self._mapper = mapper or PrincipalMapper.from_rules()

    def from_certificate(self, certificate: bytes | None) -> str:
        """The principal of a TLS peer; ``certificate`` is its verified DER leaf, or None."""
        if certificate is None:
            return ANONYMOUS
        try:
            subject = certificate_subject(certificate)
        except DerError as exc:
            raise PrincipalError(f"unreadable client certificate: {exc}") from None
        try:
            return f"{USER_TYPE}:{self._mapper.name(subject)}"
        except NoMatchingRuleError as exc:
            raise PrincipalError(
                f"Failed to map name for '{subject}' based on SSL principal mapping rules: {exc}"
            ) from None

    @staticmethod
    def from_sasl(authorization_id: str) -> str:
        return f"{USER_TYPE}:{authorization_id}"
