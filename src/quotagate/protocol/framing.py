"""Kafka's length-prefixed framing, sans-I/O.

Every frame handed out includes its 4-byte big-endian size prefix, so a frame that nothing
changes is forwarded as the very bytes that arrived. Offsets used elsewhere in ``protocol/``
(header, body) are therefore counted from the start of the prefix.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from struct import Struct
from typing import ClassVar, Final

from quotagate.protocol.errors import ProtocolError

SIZE_PREFIX: Final = 4
DEFAULT_MAX_FRAME_BYTES: Final = 104_857_600  # Kafka's socket.request.max.bytes default

_INT32 = Struct(">i")
# feed() appends a chunk below this size to a previous chunk also below it, instead of
# keeping it apart: bounds the per-chunk overhead of tiny reads at a small copy per read.
_MERGE_BELOW: Final = 16_384


class FrameError(ProtocolError):
    """The byte stream cannot be framed; the connection must be closed."""

    reason: ClassVar[str] = "bad_frame"


class FrameTooLargeError(FrameError):
    pass


class InvalidFrameSizeError(FrameError):
    pass


class FrameReader:
    """Cuts a byte stream into frames.

    Chunks are kept as received and joined only when a frame spans several of them, so
    reading is linear in the bytes received. A size prefix is checked as soon as its four
    bytes are in, before any of the (possibly huge) frame is buffered.

    ``admit``, if given, is asked once per frame, as soon as its prefix is in and checked,
    whether the frame may be buffered: ``admit(total)`` with ``total`` the frame's size
    prefix included. While it answers False, :meth:`next_frame` returns None (and asks again
    on the next call); the caller is expected to stop feeding bytes until it can admit.
    """

    __slots__ = ("_admit", "_admitted", "_buffered", "_chunks", "_max_frame_bytes", "_offset")

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        admit: Callable[[int], bool] | None = None,
    ) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self._max_frame_bytes = max_frame_bytes
        self._admit = admit
        self._admitted = 0  # total size of the frame in progress once admitted, else 0
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # read position inside self._chunks[0]
        self._buffered = 0  # unread bytes over all chunks

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as a frame."""
        return self._buffered

    @property
    def admitted(self) -> int:
        """Size (prefix included) of the admitted frame being assembled; 0 if none."""
        return self._admitted

    def feed(self, data: bytes) -> None:
        chunks = self._chunks
        if chunks and len(data) < _MERGE_BELOW and len(chunks[-1]) < _MERGE_BELOW:
            # A client trickling a frame in tiny reads would otherwise cost a bytes object
            # and a deque slot (~40 bytes) per byte received; merged, a held byte costs ~1.
            chunks[-1] += data
            self._buffered += len(data)
        elif data:
            chunks.append(data)
            self._buffered += len(data)

    def next_frame(self) -> bytes | None:
        """The next complete frame (size prefix included), or None until more data arrives.

        Raises :class:`FrameError` on a negative or oversized length.
        """
        if self._buffered < SIZE_PREFIX:
            return None
        head = self._chunks[0]
        offset = self._offset
        if len(head) - offset >= SIZE_PREFIX:
            (size,) = _INT32.unpack_from(head, offset)
        else:
            (size,) = _INT32.unpack(self._peek(SIZE_PREFIX))
        if size < 0:
            raise InvalidFrameSizeError(f"negative frame size {size}")
        if size > self._max_frame_bytes:
            raise FrameTooLargeError(
                f"frame of {size} bytes exceeds socket.request.max.bytes={self._max_frame_bytes}"
            )
        total = SIZE_PREFIX + size
        if not self._admitted:
            admit = self._admit
            if admit is not None and not admit(total):
                return None
            self._admitted = total
        if self._buffered < total:
            return None
        self._buffered -= total
        self._admitted = 0
        end = offset + total
        if end > len(head):
            return self._join(total)
        if end == len(head):
            self._chunks.popleft()
            self._offset = 0
            return head if offset == 0 else head[offset:]
        self._offset = end
        return head[offset:end]

    def _peek(self, count: int) -> bytes:
        """The next ``count`` buffered bytes (at most a few chunks), without consuming them."""
        parts = []
        offset = self._offset
        for chunk in self._chunks:
            parts.append(chunk[offset : offset + count])
            count -= len(parts[-1])
            offset = 0
            if count <= 0:
                break
        return b"".join(parts)

    def _join(self, total: int) -> bytes:
        """Cut ``total`` bytes spanning several chunks: one copy, of exactly the frame."""
        chunks = self._chunks
        parts: list[bytes | memoryview] = []
        offset = self._offset
        need = total
        while need:
            chunk = chunks[0]
            available = len(chunk) - offset
            if available <= need:
                parts.append(memoryview(chunk)[offset:] if offset else chunk)
                chunks.popleft()
                offset = 0
                need -= available
            else:
                parts.append(memoryview(chunk)[offset : offset + need])
                offset += need
                need = 0
        self._offset = offset
        return b"".join(parts)


def frame_size(frame: bytes) -> int:
    """The size announced in a frame's prefix."""
    size: int = _INT32.unpack_from(frame, 0)[0]
    return size


def with_size_prefix(payload: bytes) -> bytes:
    """``payload`` as a frame."""
    return _INT32.pack(len(payload)) + payload
