"""Reading the fields of a Produce request the gateway needs without decoding records."""

from __future__ import annotations

from struct import Struct

from quotagate.protocol.headers import HeaderError, RequestHeader, read_uvarint

_INT16 = Struct(">h")
_FIRST_WITH_TRANSACTIONAL_ID = 3
_FIRST_FLEXIBLE = 9


def produce_acks(frame: bytes, header: RequestHeader) -> int:
    """The ``acks`` of a Produce request; acks=0 means the broker sends no response."""
    offset = header.body_offset
    if offset < 0:
        raise HeaderError(f"produce v{header.api_version} is not modelled")
    if header.api_version >= _FIRST_WITH_TRANSACTIONAL_ID:
        if header.api_version >= _FIRST_FLEXIBLE:
            length_plus_one, offset = read_uvarint(frame, offset)
            offset += max(length_plus_one - 1, 0)
        else:
            if offset + 2 > len(frame):
                raise HeaderError("produce request truncated before transactional id")
            (length,) = _INT16.unpack_from(frame, offset)
            offset += 2 + max(length, 0)
    if offset + 2 > len(frame):
        raise HeaderError("produce request truncated before acks")
    acks: int = _INT16.unpack_from(frame, offset)[0]
    return acks
