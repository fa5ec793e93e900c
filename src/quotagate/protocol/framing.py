"""Kafka's length-prefixed framing, sans-I/O.

Every frame handed out includes its 4-byte big-endian size prefix, so a frame that nothing
changes is forwarded as the very bytes that arrived. Offsets used elsewhere in ``protocol/``
(header, body) are therefore counted from the start of the prefix.
"""

from __future__ import annotations

from collections import deque
from struct import Struct
from typing import Final

SIZE_PREFIX: Final = 4
DEFAULT_MAX_FRAME_BYTES: Final = 104_857_600  # Kafka's socket.request.max.bytes default

_INT32 = Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class FrameTooLargeError(FrameError):
    pass


class InvalidFrameSizeError(FrameError):
    pass


class FrameReader:
    """Cuts a byte stream into frames.

    Chunks are kept as received and joined only when a frame spans several of them, so
    reading is linear in the bytes received. A size prefix is checked as soon as its four
    bytes are in, before any of the (possibly huge) frame is buffered.
    """

    __slots__ = ("_buffered", "_chunks", "_max_frame_bytes", "_offset")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self._max_frame_bytes = max_frame_bytes
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # read position inside self._chunks[0]
        self._buffered = 0  # unread bytes over all chunks

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as a frame."""
        return self._buffered

    def feed(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self._buffered += len(data)

    def next_frame(self) -> bytes | None:
        """The next complete frame (size prefix included), or None until more data arrives.

        Raises :class:`FrameError` on a negative or oversized length.
        """
        if self._buffered < SIZE_PREFIX:
            return None
        head = self._chunks[0]
        if len(head) - self._offset < SIZE_PREFIX:
            head = self._coalesce()
        offset = self._offset
        (size,) = _INT32.unpack_from(head, offset)
        if size < 0:
            raise InvalidFrameSizeError(f"negative frame size {size}")
        if size > self._max_frame_bytes:
            raise FrameTooLargeError(
                f"frame of {size} bytes exceeds socket.request.max.bytes={self._max_frame_bytes}"
            )
        total = SIZE_PREFIX + size
        if self._buffered < total:
            return None
        if len(head) - offset < total:
            head = self._coalesce()
            offset = 0
        end = offset + total
        frame = head if offset == 0 and end == len(head) else head[offset:end]
        self._buffered -= total
        if end == len(head):
            self._chunks.popleft()
            self._offset = 0
        else:
            self._offset = end
        return frame

    def _coalesce(self) -> bytes:
        joined = b"".join(self._chunks)[self._offset :]
        self._chunks.clear()
        self._chunks.append(joined)
        self._offset = 0
        return joined


def frame_size(frame: bytes) -> int:
    """The size announced in a frame's prefix."""
    size: int = _INT32.unpack_from(frame, 0)[0]
    return size


def with_size_prefix(payload: bytes) -> bytes:
    """``payload`` as a frame."""
    return _INT32.pack(len(payload)) + payload
