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


def test_admit_is_asked_once_per_frame_with_its_size_before_the_frame_is_buffered() -> None:
    asked: list[int] = []
    reader = FrameReader(admit=lambda total: asked.append(total) or True)
    reader.feed(struct.pack(">i", 10))
    assert reader.next_frame() is None
    assert asked == [14]
    assert reader.admitted == 14
    reader.feed(b"0123456789" + with_size_prefix(b"abc")[:2])
    assert reader.next_frame() == with_size_prefix(b"0123456789")
    assert reader.next_frame() is None  # the next prefix is not complete yet: not asked
    assert asked == [14]
    reader.feed(with_size_prefix(b"abc")[2:])
    assert reader.next_frame() == with_size_prefix(b"abc")
    assert asked == [14, 7]
    assert reader.admitted == 0


def test_a_refused_frame_waits_and_is_asked_again() -> None:
    answers = [False, False, True]
    asked: list[int] = []

    def admit(total: int) -> bool:
        asked.append(total)
        return answers.pop(0)

    reader = FrameReader(admit=admit)
    reader.feed(with_size_prefix(b"payload"))
    assert reader.next_frame() is None
    assert reader.next_frame() is None
    assert reader.admitted == 0
    assert reader.next_frame() == with_size_prefix(b"payload")
    assert asked == [11, 11, 11]


def test_oversized_and_negative_frames_are_refused_before_admission() -> None:
    asked: list[int] = []
    reader = FrameReader(100, admit=lambda total: asked.append(total) or True)
    reader.feed(struct.pack(">i", 101))
    with pytest.raises(FrameTooLargeError):
        reader.next_frame()
    assert asked == []


def test_a_trickled_frame_is_held_in_few_chunks() -> None:
    # One byte per read would otherwise keep one bytes object (~34 bytes) per byte received.
    payload = bytes(range(256)) * 256  # 64 KiB
    frame = with_size_prefix(payload)
    reader = FrameReader()
    for index in range(len(frame) - 1):
        reader.feed(frame[index : index + 1])
    assert reader.next_frame() is None
    assert len(reader._chunks) <= len(frame) // 16_384 + 1
    reader.feed(frame[-1:])
    assert reader.next_frame() == frame
    assert reader.buffered == 0


def test_a_prefix_split_across_chunks_is_read_without_joining_the_rest() -> None:
    second = with_size_prefix(b"y" * 50_000)
    stream = with_size_prefix(b"x" * 20_000) + second
    reader = FrameReader()
    cut = 4 + 20_000 + 2  # the second prefix is split
    reader.feed(stream[:cut])
    assert reader.next_frame() == with_size_prefix(b"x" * 20_000)
    assert reader.next_frame() is None
    reader.feed(stream[cut:])
    assert reader.next_frame() == second
    assert reader.buffered == 0
