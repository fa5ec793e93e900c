"""A minimal, bounds-checked DER reader: just enough to walk a certificate to its subject.

Every length is checked against the bytes actually present before anything is sliced, so a
hostile or truncated encoding raises :class:`DerError` and never makes us allocate what it
merely declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SEQUENCE: Final = 0x30
SET: Final = 0x31
OBJECT_IDENTIFIER: Final = 0x06
CONTEXT_0: Final = 0xA0  # [0] EXPLICIT, constructed: a certificate's version


class DerError(ValueError):
    """The bytes are not the DER this reader expects."""


@dataclass(frozen=True, slots=True)
class Tlv:
    """One element: its tag, where its content starts and ends, and where it ended whole."""

    tag: int
    start: int  # first byte of the whole element (its tag)
    content: int  # first byte of the content
    end: int  # one past the last content byte


def read(data: bytes, offset: int, limit: int) -> Tlv:
    """The element at ``offset``; it must end at or before ``limit``."""
    if offset + 2 > limit:
        raise DerError("truncated element")
    tag = data[offset]
    if tag & 0x1F == 0x1F:
        raise DerError("multi-byte tags do not occur in a certificate name")
    first = data[offset + 1]
    position = offset + 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        # Four length bytes already describe 4 GiB: more is not a certificate.
        if count == 0 or count > 4:
            raise DerError("indefinite or oversized length")
        if position + count > limit:
            raise DerError("truncated length")
        length = int.from_bytes(data[position : position + count], "big")
        position += count
    if length > limit - position:
        raise DerError(f"element declares {length} bytes, {limit - position} remain")
    return Tlv(tag, offset, position, position + length)


def expect(data: bytes, offset: int, limit: int, tag: int) -> Tlv:
    element = read(data, offset, limit)
    if element.tag != tag:
        raise DerError(f"expected tag 0x{tag:02x}, found 0x{element.tag:02x}")
    return element


def children(data: bytes, parent: Tlv) -> list[Tlv]:
    """The elements inside a constructed element, in encoded order."""
    found = []
    position = parent.content
    while position < parent.end:
        element = read(data, position, parent.end)
        found.append(element)
        position = element.end
    return found


def object_identifier(data: bytes, element: Tlv) -> str:
    """Dotted form of an OBJECT IDENTIFIER's content."""
    content = data[element.content : element.end]
    if not content or content[-1] & 0x80:
        raise DerError("malformed object identifier")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(arc) for arc in (*head, *arcs[1:]))
