"""The instance hub's frames (fleet/local_hub): whatever a link sends, the hub relays whole
frames or closes that one link; it never dies, never allocates more than it received, and a
bystander still hears the next report."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import strategies as st

from fuzz.budget import Budget, run_examples
from quotagate.fleet.local_hub import HEADER, MAX_FRAME, FrameError, frame, read_frame


def _read_all(data: bytes) -> tuple[list[bytes], str]:
    async def go() -> tuple[list[bytes], str]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        frames: list[bytes] = []
        try:
            while (one := await read_frame(reader)) is not None:
                frames.append(one)
        except FrameError as exc:
            return frames, str(exc)
        return frames, "eof"

    return asyncio.run(go())


def test_frames_cut_anywhere_are_whole_or_nothing(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        payloads = data.draw(st.lists(st.binary(max_size=300), max_size=5))
        stream = b"".join(frame(p) for p in payloads)
        cut = data.draw(st.integers(0, len(stream)))
        frames, end = _read_all(stream[:cut])
        assert end == "eof"
        assert [f[HEADER.size :] for f in frames] == payloads[: len(frames)]
        assert sum(len(f) for f in frames) <= cut

    run_examples(body, budget.lie_frames * 4, budget, "lies")


def test_a_length_lie_closes_the_link_without_allocating_it(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        declared = data.draw(st.integers(MAX_FRAME + 1, 2**32 - 1))
        tail = data.draw(st.binary(max_size=64))
        frames, end = _read_all(struct.pack(">I", declared) + tail)
        assert frames == [] and "more than" in end

    run_examples(body, budget.lie_frames * 4, budget, "lies")


def test_random_bytes_never_raise_anything_but_a_frame_error(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        frames, _end = _read_all(data.draw(st.binary(max_size=2_000)))
        for one in frames:
            (size,) = HEADER.unpack(one[: HEADER.size])
            assert size == len(one) - HEADER.size

    run_examples(body, budget.lie_frames * 4, budget, "lies")
