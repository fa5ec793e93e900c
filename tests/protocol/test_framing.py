from __future__ import annotations

import struct

import pytest

from quotagate.protocol.framing import (
    FrameReader,
    FrameTooLargeError,
    InvalidFrameSizeError,
    with_size_prefix,
)


def _frames(reader: FrameReader) -> list[bytes]:
    frames = []
    while (frame := reader.next_frame()) is not None:
        frames.append(frame)
    return frames


def test_frames_come_out_whole_with_their_prefix_whatever_the_chunking() -> None:
    payloads = [b"a" * 3, b"", b"b" * 1000, b"c" * 7]
    stream = b"".join(with_size_prefix(p) for p in payloads)
    for chunk in (1, 2, 3, 5, 64, len(stream)):
        reader = FrameReader(2000)
        received: list[bytes] = []
        for start in range(0, len(stream), chunk):
            reader.feed(stream[start : start + chunk])
            received.extend(_frames(reader))
        assert received == [with_size_prefix(p) for p in payloads]
        assert reader.buffered == 0


def test_a_partial_frame_waits_for_the_rest() -> None:
    reader = FrameReader()
    reader.feed(struct.pack(">i", 10) + b"12345")
    assert reader.next_frame() is None
    assert reader.buffered == 9
    reader.feed(b"67890extra")
    assert reader.next_frame() == struct.pack(">i", 10) + b"1234567890"
    assert reader.buffered == 5


def test_oversized_frames_are_refused_before_buffering_them() -> None:
    reader = FrameReader(100)
    reader.feed(struct.pack(">i", 101))
    with pytest.raises(FrameTooLargeError, match=r"socket\.request\.max\.bytes=100"):
        reader.next_frame()


def test_a_frame_of_exactly_the_maximum_is_accepted() -> None:
    reader = FrameReader(100)
    reader.feed(with_size_prefix(b"x" * 100))
    assert reader.next_frame() == with_size_prefix(b"x" * 100)


def test_negative_sizes_are_refused() -> None:
    reader = FrameReader()
    reader.feed(struct.pack(">i", -1))
    with pytest.raises(InvalidFrameSizeError):
        reader.next_frame()
