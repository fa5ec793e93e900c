"""The OAUTHBEARER client's first message (RFC 7628 §3.1, with KIP-342 extensions), as Kafka
reads it in ``OAuthBearerClientInitialResponse``.

``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]...\\x01``: the whole message
must match Kafka's grammar (ASCII only; keys letters only; values printable ASCII, space,
tab, CR, LF); key-value pairs are split as Kafka's ``Utils.parseMap`` splits them (a repeated
key keeps its last value); ``auth`` is required and must be ``Bearer`` (any case) followed by
spaces and a base64url-ish token. The authorization id is kept as sent (``=2C`` and ``=3D``
are not decoded: Kafka compares it with the token's principal as is).

Pure and total: any bytes give either a :class:`ClientFirst` or an
:class:`InvalidClientFirstError`; nothing is allocated beyond the message itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

SEPARATOR: Final = "\x01"
AUTH_KEY: Final = "auth"

_SASLNAME: Final = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # \x01-\x7F except ',' '='
_KEY: Final = r"[A-Za-z]+"
_VALUE: Final = r"[\x21-\x7E \t\r\n]+"
_MESSAGE: Final = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01"
)
_AUTH: Final = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)


class InvalidClientFirstError(ValueError):
    """Kafka's SaslException for a message it cannot read; the text is Kafka's."""


@dataclass(frozen=True, slots=True)
class ClientFirst:
    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)


def client_initial_response(token: str) -> bytes:
    """The message a client sends, as Kafka's ``OAuthBearerClientInitialResponse`` writes it
    without an authorization id or extensions (what the gateway sends its upstream)."""
    return f"n,,{SEPARATOR}{AUTH_KEY}=Bearer {token}{SEPARATOR}{SEPARATOR}".encode()


def parse_client_first(message: bytes) -> ClientFirst:
    # Java decodes with replacement characters, which the ASCII grammar then refuses.
    text = message.decode("utf-8", errors="replace")
    matched = _MESSAGE.fullmatch(text)
    if matched is None:
        raise InvalidClientFirstError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    kvpairs = matched.group("kvpairs")
    if kvpairs:
        for pair in kvpairs[:-1].split(SEPARATOR):
            key, _, value = pair.partition("=")
            pairs[key] = value
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise InvalidClientFirstError(
            "Invalid OAUTHBEARER client first message: 'auth' not specified"
        )
    bearer = _AUTH.fullmatch(auth)
    if bearer is None:
        raise InvalidClientFirstError(
            "Invalid OAUTHBEARER client first message: invalid 'auth' format"
        )
    if bearer.group("scheme").lower() != "bearer":
        raise InvalidClientFirstError(
            f"Invalid scheme in OAUTHBEARER client first message: {bearer.group('scheme')}"
        )
    return ClientFirst(bearer.group("token"), matched.group("authzid") or "", pairs)
