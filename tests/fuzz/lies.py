"""Length lies and truncations of a valid body, at every byte offset.

A declared length can sit anywhere in a body and be encoded three ways (unsigned varint,
int16, int32), so rather than trusting any schema walk to say where lengths are, every offset
gets every lie: overwritten in place and inserted, as huge, negative, null and off-by-one
values; and the body is cut at every offset. Whatever decodes a body must survive all of them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NamedTuple


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Compact lengths are N + 1: 0 is null, 1 is empty; 2^34 is the topics count.
_VARINTS: Final = (0, 1, 2, 0x7F, 0x3FFF, 1 << 28, (1 << 31) - 1, 1 << 31, 1 << 34, (1 << 35) - 1)
_INT16S: Final = (-1, -2, -(1 << 15), (1 << 15) - 1, 0x100)
_INT32S: Final = (-1, -2, -(1 << 31), (1 << 31) - 1, 1 << 24)
# Six continuation bytes: longer than any varint a length may use.
_OVERLONG: Final = b"\xff\xff\xff\xff\xff\x01"


class Lie(NamedTuple):
    what: str
    body: bytes


def fixed_lies() -> list[tuple[str, bytes]]:
    """Encoded lies that do not depend on where they are put."""
    lies = [(f"uvarint {v}", uvarint(v)) for v in _VARINTS]
    lies += [(f"int16 {v}", struct.pack(">h", v)) for v in _INT16S]
    lies += [(f"int32 {v}", struct.pack(">i", v)) for v in _INT32S]
    lies.append(("overlong varint", _OVERLONG))
    return lies


def _one_too_many(after: int) -> list[tuple[str, bytes]]:
    """Lengths claiming one byte more than the ``after`` bytes that follow them."""
    claim = after + 1
    out = [(f"int32 {claim} (one too many)", struct.pack(">i", claim))]
    if claim < 1 << 15:
        out.append((f"int16 {claim} (one too many)", struct.pack(">h", claim)))
    return out


def _compact_one_too_many(after: int) -> tuple[str, bytes]:
    claim = after + 1
    return f"uvarint {claim + 1} (compact, one too many)", uvarint(claim + 1)


def lies(body: bytes) -> Iterator[Lie]:
    """Every truncation, then every lie overwritten and inserted at every offset."""
    for end in range(len(body)):
        yield Lie(f"truncated at {end}", body[:end])
    fixed = fixed_lies()
    for offset in range(len(body) + 1):
        tail = len(body) - offset
        for name, raw in fixed:
            if len(raw) <= tail:
                yield Lie(f"{name} over offset {offset}", _overwrite(body, offset, raw))
            yield Lie(f"{name} inserted at {offset}", body[:offset] + raw + body[offset:])
        for name, raw in [*_one_too_many(tail), _compact_one_too_many(tail)]:
            yield Lie(f"{name} inserted at {offset}", body[:offset] + raw + body[offset:])
        for width in (w for w in (2, 4) if w <= tail):
            for name, raw in _one_too_many(tail - width):
                if len(raw) == width:
                    yield Lie(f"{name} over offset {offset}", _overwrite(body, offset, raw))
        for width in range(1, min(tail, 5) + 1):
            name, raw = _compact_one_too_many(tail - width)
            if len(raw) == width:
                yield Lie(f"{name} over offset {offset}", _overwrite(body, offset, raw))


def _overwrite(body: bytes, offset: int, raw: bytes) -> bytes:
    return body[:offset] + raw + body[offset + len(raw) :]
