"""Reading and setting ``throttle_time_ms`` in a response frame.

Where the field is the first of the body (most APIs), or the last of a removed non-flexible
version (Produce v1-2), it is spliced in place without decoding; elsewhere (Produce,
ApiVersions, a few others) the body is decoded and re-encoded with kio, which is fine for
those small responses.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from struct import Struct

from quotagate.protocol import api_table
from quotagate.protocol.api_table import ThrottleField
from quotagate.protocol.codec import decode_response, replace_response_body
from quotagate.protocol.headers import HeaderError, response_body_offset

_INT32 = Struct(">i")


def get_throttle_time_ms(frame: bytes, api_key: int, api_version: int) -> int:
    where = api_table.throttle_field(api_key, api_version)
    if where is ThrottleField.ABSENT:
        raise ValueError(f"api {api_key} v{api_version} has no throttle_time_ms")
    if where is ThrottleField.FIRST or where is ThrottleField.LAST:
        offset = _splice_offset(frame, api_key, api_version, where)
        value: int = _INT32.unpack_from(frame, offset)[0]
        return value
    response = decode_response(frame, api_key, api_version)
    return timedelta_ms(response.throttle_time)


def _splice_offset(frame: bytes, api_key: int, api_version: int, where: ThrottleField) -> int:
    body = response_body_offset(frame, api_key, api_version)
    offset = len(frame) - 4 if where is ThrottleField.LAST else body
    if offset < body or offset + 4 > len(frame):
        raise HeaderError(f"api {api_key} v{api_version} response too short for throttle_time_ms")
    return offset


def timedelta_ms(value: timedelta) -> int:
    """Whole milliseconds of a kio duration, exactly (float seconds would turn 1001 into 1000)."""
    return value // timedelta(milliseconds=1)


def set_throttle_time_ms(frame: bytes, api_key: int, api_version: int, throttle_ms: int) -> bytes:
    """``frame`` with ``throttle_time_ms`` set; ValueError if the version has no such field."""
    where = api_table.throttle_field(api_key, api_version)
    if where is ThrottleField.ABSENT:
        raise ValueError(f"api {api_key} v{api_version} has no throttle_time_ms")
    if where is ThrottleField.FIRST or where is ThrottleField.LAST:
        spliced = bytearray(frame)
        _INT32.pack_into(spliced, _splice_offset(frame, api_key, api_version, where), throttle_ms)
        return bytes(spliced)
    response = decode_response(frame, api_key, api_version)
    updated = dataclasses.replace(response, throttle_time=timedelta(milliseconds=throttle_ms))
    return replace_response_body(frame, api_key, api_version, updated)
