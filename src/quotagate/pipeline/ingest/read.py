"""Request-log files dealt to ingest tasks as byte ranges, and read back as Arrow arrays
of lines.

A line belongs to the range its first byte is in, so ranges can be cut anywhere: a task
whose range starts inside a line skips to the next one, and its last line runs past its
range's end. Lines end at ``\\n``, ``\\r\\n`` or ``\\r``, as Spark's text reader ends them;
bytes that are not UTF-8 are read as U+FFFD, as Python's ``errors="replace"`` reads them.
Compressed files (gzip ``.gz``, bzip2 ``.bz2``, which Spark's text reader also reads) are
read whole by one task.
"""

from __future__ import annotations

import bz2
import gzip
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import pyarrow as pa

from quotagate.pipeline.errors import PipelineError

# A task reads its range this many bytes at a time (and a line more): one Arrow array of
# lines per block, far below the 2 GiB a string array can hold.
BLOCK_BYTES: Final = 16 << 20
# No range is cut smaller: a range costs a file open and a partial line either side.
MIN_PIECE_BYTES: Final = 32 << 20


class _Stream(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...
    def readline(self, size: int = ..., /) -> bytes: ...
    def tell(self) -> int: ...


_OPENERS: Final[dict[str, Callable[..., Any]]] = {".gz": gzip.GzipFile, ".bz2": bz2.BZ2File}


@dataclass(frozen=True, slots=True)
class Piece:
    """Bytes ``[start, end)`` of one file (``end`` -1: to its end)."""

    path: str
    start: int
    end: int


def deal_pieces(files: list[Path], tasks: int) -> tuple[tuple[Piece, ...], ...]:
    """The pieces each of ``tasks`` tasks reads: files cut into ranges of about an equal
    share of all bytes, the largest first onto the task with the fewest bytes. Tasks may be
    left without a piece (fewer pieces than tasks)."""
    sizes = {f: f.stat().st_size for f in files}
    share = max(MIN_PIECE_BYTES, -(-sum(sizes.values()) // max(tasks, 1)))
    pieces: list[tuple[int, Piece]] = []
    for path, size in sizes.items():
        absolute = str(path.resolve())
        if path.suffix in _OPENERS or size <= share:
            pieces.append((size, Piece(absolute, 0, -1)))
            continue
        for start in range(0, size, share):
            end = min(start + share, size)
            pieces.append((end - start, Piece(absolute, start, end)))
    load = [(0, task) for task in range(max(tasks, 1))]
    dealt: list[list[Piece]] = [[] for _ in load]
    for size, piece in sorted(pieces, key=lambda p: (-p[0], p[1].path, p[1].start)):
        total, task = heapq.heappop(load)
        dealt[task].append(piece)
        heapq.heappush(load, (total + size, task))
    return tuple(tuple(task) for task in dealt)


def read_lines(piece: Piece) -> Iterator[pa.StringArray]:
    """The lines of ``piece``, a block at a time, without their line ends."""
    for raw in _blocks(piece):
        block = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in raw else raw
        try:
            yield _split(block, piece.path).cast(pa.string())
        except pa.ArrowInvalid:
            text = block.decode("utf-8", "replace").encode()
            yield _split(text, piece.path).cast(pa.string())


def _blocks(piece: Piece) -> Iterator[bytes]:
    """Whole lines of the piece, about ``BLOCK_BYTES`` at a time; each block ends with a
    line end except, perhaps, the file's last."""
    opener = _OPENERS.get(Path(piece.path).suffix)
    if opener is not None:
        with opener(piece.path, "rb") as stream:
            yield from _whole_lines(stream, -1)
        return
    with open(piece.path, "rb") as stream:
        if piece.start > 0:
            stream.seek(piece.start - 1)
            stream.readline()  # the end of a line that began in the piece before
        yield from _whole_lines(stream, piece.end)


def _whole_lines(stream: _Stream, end: int) -> Iterator[bytes]:
    position = stream.tell()
    while end < 0 or position < end:
        wanted = BLOCK_BYTES if end < 0 else min(BLOCK_BYTES, end - position)
        block = stream.read(wanted)
        if not block:
            return
        if not block.endswith(b"\n"):
            block += stream.readline()  # the last line runs on past the block
        position += len(block)
        yield block


def _split(block: bytes, path: str) -> pa.BinaryArray:
    """``block``'s lines as one array over a copy of its bytes without the ``\\n``s."""
    if not block:
        return pa.array([], pa.binary())
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    if not block.endswith(b"\n"):
        ends = np.append(ends, len(block))
    count = len(ends)
    # Line i spans [ends[i-1] + 1, ends[i]) in the block, and i bytes fewer without them.
    offsets = np.empty(count + 1, np.int64)
    offsets[0] = 0
    offsets[1:] = ends - np.arange(count)
    data = block.replace(b"\n", b"")
    if len(data) >= 2**31:
        raise PipelineError(f"a line of 2 GiB or more in {path}")
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), count, buffers)
