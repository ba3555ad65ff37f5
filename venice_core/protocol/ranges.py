"""Byte ranges of one buffer concatenated by Arrow's `take`, in C++: no Python, and no pass over the bytes between.

A consumed batch held as one buffer (`put_run`) has its parts at known ranges: keys, values, strings inside values.
Cutting them out byte by byte with numpy (a mask over the whole buffer) costs a pass over every byte; as an Arrow
binary array whose elements alternate wanted range and gap, a `take` of every other element copies only the wanted
bytes, one memcpy each.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _indices(values: np.ndarray) -> pa.Array:
    values = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def concatenated(
    buffer: bytes | np.ndarray, starts: np.ndarray, ends: np.ndarray, arrow_type: pa.DataType | None = None
) -> pa.Array:
    """The ranges [starts, ends) of `buffer` (disjoint, ascending, under 2 GB in all) as one Arrow binary (or
    `arrow_type`: string) array, each range an element."""
    count = len(starts)
    if count == 0:
        empty = [None, pa.py_buffer(np.zeros(1, np.int32)), pa.py_buffer(b"")]
        return pa.Array.from_buffers(arrow_type or pa.binary(), 0, empty)
    # Elements: range 0, gap 0, range 1, gap 1, ..., range n-1: the offsets are the ranges' bounds interleaved.
    bounds = np.empty(2 * count, np.int64)
    bounds[0::2], bounds[1::2] = starts, ends
    if bounds[-1] >= 2**31:
        raise ValueError("byte ranges beyond 2 GB")
    interleaved = pa.Array.from_buffers(
        arrow_type or pa.binary(), 2 * count - 1, [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(buffer)]
    )
    return interleaved.take(_indices(np.arange(0, 2 * count, 2)))


def joined(buffer: bytes | np.ndarray, starts: np.ndarray, ends: np.ndarray) -> memoryview:
    """The ranges' bytes, one after another."""
    array = concatenated(buffer, starts, ends)
    _, offsets, data = array.buffers()
    size = int(np.frombuffer(offsets, np.int32, len(array) + 1, array.offset * 4)[-1]) if len(array) else 0
    return memoryview(data)[:size] if data is not None else memoryview(b"")
