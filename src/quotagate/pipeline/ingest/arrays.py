"""Whole-array operations the vectorized ingest needs and ``pyarrow.compute`` lacks: a
substring at a different place in every row, every match of a pattern in a row, sums
over lists, Python's rounding. Offsets are in bytes: the arrays hold ASCII or UTF-8 text
cut at ASCII characters, where a byte offset is a character boundary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

IntArray = np.ndarray[Any, np.dtype[np.int64]]
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]
# Bytes an Arrow view holds in itself; longer values are pointed at.
_INLINE = 12


def offsets_of(array: pa.Array) -> tuple[IntArray, np.ndarray[Any, np.dtype[np.uint8]]]:
    """Where each row starts in the bytes (``len + 1`` offsets, the last where the last
    row ends) and the bytes of a string/binary array."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if len(array) == 0:
        return np.zeros(1, np.int64), np.empty(0, np.uint8)
    width = (
        np.int64
        if pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
        else np.int32
    )
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, width)[array.offset : array.offset + len(array) + 1]
    data = (
        np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    )
    return offsets.astype(np.int64), data


def lengths(array: pa.Array) -> IntArray:
    """Byte length of every row (0 for a null)."""
    return np.asarray(pc.fill_null(pc.binary_length(array), 0).to_numpy(), np.int64)


def slice_rows(
    array: pa.Array, start: IntArray, stop: IntArray, rows: IntArray | None = None
) -> pa.Array:
    """Row i's bytes ``[start[i], stop[i])``, as a new array of the same type (empty where
    ``stop <= start``); with ``rows``, of those rows only (``start``/``stop`` one per row
    chosen).

    Built as a view array over the same bytes (one 16-byte view per row, no byte copied
    by numpy), then cast to a plain one by Arrow: a byte-by-byte gather in numpy cost
    twenty times as much."""
    offsets, data = offsets_of(array)
    first, size = offsets[:-1], np.diff(offsets)
    if rows is not None:
        first, size = first[rows], size[rows]
    start = np.clip(start, 0, size)
    stop = np.clip(stop, start, size)
    length = stop - start
    source = first + start
    views = np.zeros((len(length), 16), np.uint8)
    words = views.view(np.int32)  # length, 4 prefix bytes, buffer index, offset
    words[:, 0] = length
    padded = np.concatenate([data, np.zeros(16, np.uint8)])
    # A short value is copied into its view; a longer one by its first 4 bytes and offset.
    short = length <= _INLINE
    inline = padded[source[short, None] + np.arange(_INLINE)]
    inline[np.arange(_INLINE)[None, :] >= length[short, None]] = 0
    views[short, 4:] = inline
    views[~short, 4:8] = padded[source[~short, None] + np.arange(4)]
    words[~short, 3] = source[~short]
    binary = pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)
    kind = pa.binary_view() if binary else pa.string_view()
    buffers = [None, pa.py_buffer(views), pa.py_buffer(data)]
    viewed = pa.Array.from_buffers(kind, len(length), buffers)
    return viewed.cast(pa.binary() if binary else pa.string())


def found(array: pa.Array, pattern: str) -> IntArray:
    """Byte offset of the first match of the regular expression in every row, -1 if none."""
    return np.asarray(
        pc.fill_null(pc.find_substring_regex(array, pattern), -1).to_numpy(), np.int64
    )


def find(array: pa.Array, text: str) -> IntArray:
    return np.asarray(pc.fill_null(pc.find_substring(array, text), -1).to_numpy(), np.int64)


def group(array: pa.Array, pattern: str, name: str) -> pa.Array:
    """Capture group ``name`` of the first match of ``pattern`` (null where none)."""
    return pc.struct_field(pc.extract_regex(array, pattern), name)


def integers_after(array: pa.Array, marker: str, value: str = r"-?\d+") -> pa.ListArray:
    """Per row, every integer ``value`` that directly follows a match of ``marker`` (as
    Python's ``re.findall(marker + "(" + value + ")")`` finds them, for a marker whose
    matches cannot overlap or hold the value's characters)."""
    pieces = pc.split_pattern_regex(array, marker)
    offsets = np.asarray(pieces.offsets.to_numpy(), np.int64)
    flat = pc.list_flatten(pieces)
    parents = np.asarray(pc.list_parent_indices(pieces).to_numpy(), np.int64)
    after_marker = np.ones(len(flat), np.bool_)
    after_marker[offsets[:-1][np.diff(offsets) > 0]] = False  # each row's first piece
    digits = pc.struct_field(pc.extract_regex(flat, f"^(?P<v>{value})"), "v")
    keep = after_marker & np.asarray(pc.is_valid(digits).to_numpy(zero_copy_only=False))
    values = pc.cast(pc.filter(digits, pa.array(keep)), pa.int64())
    counts = np.bincount(parents[keep], minlength=len(array))
    new_offsets = np.zeros(len(array) + 1, np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    return pa.ListArray.from_arrays(pa.array(new_offsets.astype(np.int32)), values)


def list_sums(lists: pa.Array, values: pa.Array | IntArray | None = None) -> IntArray:
    """Sum of every row's list (of ``values``, one per list element, if given); 0 for an
    empty or null list, nulls counting 0."""
    flat = pc.list_flatten(lists) if values is None else values
    parents = np.asarray(pc.list_parent_indices(lists).to_numpy(), np.int64)
    if isinstance(flat, np.ndarray):
        numbers = flat.astype(np.int64)
    else:
        numbers = np.asarray(pc.fill_null(flat, 0).to_numpy(zero_copy_only=False), np.int64)
    return np.bincount(parents, weights=numbers, minlength=len(lists)).astype(np.int64)


def list_counts(lists: pa.ListArray) -> IntArray:
    return np.asarray(pc.fill_null(pc.list_value_length(lists), 0).to_numpy(), np.int64)


def as_bool(array: pa.Array) -> BoolArray:
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), np.bool_)


def parents_of(lists: pa.Array) -> IntArray:
    """The row of every element of ``pc.list_flatten(lists)``."""
    return np.asarray(pc.list_parent_indices(lists).to_numpy(), np.int64)


def with_values(lists: pa.Array, values: pa.Array, keep: BoolArray | None = None) -> pa.Array:
    """Lists shaped as ``lists`` (nulls where it has nulls) holding ``values``, one per
    element of ``pc.list_flatten(lists)``; with ``keep``, only the rows it marks keep
    their elements (the others are empty)."""
    counts = list_counts(lists)
    if keep is not None:
        values = pc.filter(values, pa.array(np.repeat(keep, counts)))
        counts = np.where(keep, counts, 0)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    mask = None if keep is not None else pc.is_null(lists)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)
