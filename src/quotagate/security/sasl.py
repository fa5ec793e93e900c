"""The one error every SASL exchange raises, server or client side, terminated or passed through."""

from __future__ import annotations


class SaslError(Exception):
    """Authentication failed.

    ``public`` says whether the message may go to the client as is. Kafka only reveals messages
    of SaslAuthenticationException; anything else becomes a generic "invalid credentials" text
    so that, for instance, the existence of a user never leaks.
    """

    def __init__(self, message: str, *, public: bool = False, detail: str | None = None) -> None:
        """``detail``: why, for the gateway's log, where it says more than ``message`` (the
        reason a token was refused behind OAUTHBEARER's ``invalid_token``); never a secret."""
        super().__init__(message)
        self.message = message
        self.public = public
        self.detail = detail if detail is not None else message
