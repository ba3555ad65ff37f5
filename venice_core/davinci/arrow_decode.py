"""Avro datums of a flat schema decoded straight into Arrow columns, all datums of a batch at once, with numpy.

fastavro decodes a datum at a time into Python dicts, which the DuckDB transformer then turns into Arrow columns:
about 4 microseconds a record for a three-field record. Every datum of a flat record schema has the same fields in
the same order, so a batch can be decoded field by field instead: for each field, one vectorised step reads it at
every datum's current position and advances the positions. Supported: records whose fields are boolean, int, long,
float, double, string, bytes, fixed, enum (no logical types), each optionally in a union with null; and those
primitives on their own (a `"string"` key). Anything else, `plan` answers None and the caller uses fastavro.

Malformed input is never decoded silently: a datum that ends before its fields do, or has bytes left after them, a
varint longer than ten bytes, a negative length, an enum or union index out of range, or a string that is not
UTF-8 raises `MalformedDatum`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from venice_core.errors import VeniceError

PADDING = 16  # zero bytes after the buffer: a read past a datum's end stays in bounds, and is caught after


class MalformedDatum(VeniceError):
    pass


# A field decoder: (buffer, positions, ends) -> (Arrow array, positions after the field)
Decoder = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[pa.Array, np.ndarray]]


def _varint(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints (Avro int and long) at every position: their values and the positions after them."""
    result = np.zeros(len(pos), np.uint64)
    length = np.zeros(len(pos), np.int64)
    active = np.arange(len(pos))
    for shift in range(0, 70, 7):
        byte = buf[pos[active] + length[active]].astype(np.uint64)
        result[active] |= (byte & np.uint64(0x7F)) << np.uint64(shift)
        length[active] += 1
        active = active[(byte & np.uint64(0x80)) != 0]
        if not len(active):
            break
    else:
        raise MalformedDatum("a varint longer than ten bytes")
    values = (result >> np.uint64(1)).astype(np.int64) ^ -(result & np.uint64(1)).astype(np.int64)
    return values, pos + length


def _numpy_array(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """A numpy array of fixed-width values as an Arrow array over the same memory. `pa.array` would do it too, but
    its first call on a numpy array imports pandas (0.7 s, paid inside the first commit of an ingest)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def _fixed_width(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    return buf[pos[:, None] + np.arange(width)]


def _int(arrow_type: pa.DataType) -> Decoder:
    def decode(buf: np.ndarray, pos: np.ndarray, _ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        values, pos = _varint(buf, pos)
        if arrow_type == pa.int32():
            if len(values) and (values.min() < -(2**31) or values.max() >= 2**31):
                raise MalformedDatum("an Avro int out of 32-bit range")
            values = values.astype(np.int32)
        return _numpy_array(values, arrow_type), pos

    return decode


def _float(width: int, arrow_type: pa.DataType) -> Decoder:
    dtype = np.dtype("<f4" if width == 4 else "<f8")

    def decode(buf: np.ndarray, pos: np.ndarray, _ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        raw = np.ascontiguousarray(_fixed_width(buf, pos, width))
        return _numpy_array(raw.view(dtype).reshape(-1), arrow_type), pos + width

    return decode


def _boolean(buf: np.ndarray, pos: np.ndarray, _ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    byte = buf[pos]
    if (byte > 1).any():
        raise MalformedDatum("a boolean that is neither 0 nor 1")
    bits = pa.py_buffer(np.packbits(byte, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(byte), [None, bits]), pos + 1


def _variable_width(arrow_type: pa.DataType, buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The byte ranges [starts, starts + lengths) of `buf` (disjoint, ascending) as an Arrow array, each range an
    element. A numpy mask over the whole buffer would cost a pass over every byte; as an Arrow array whose elements
    alternate wanted range and gap, a `take` of every other element copies only the wanted bytes (20x faster)."""
    count = len(starts)
    bounds = np.empty(2 * count, np.int64)
    bounds[0::2], bounds[1::2] = starts, starts + lengths
    if count and bounds[-1] >= 2**31:
        raise MalformedDatum("a batch of more than 2 GB of one column")  # not expected of a commit's batch
    if count == 0:
        bounds = np.zeros(1, np.int64)
    interleaved = pa.Array.from_buffers(
        arrow_type, max(2 * count - 1, 0), [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(buf)]
    )
    return interleaved.take(_numpy_array(np.arange(0, 2 * count, 2), pa.int64()))


def binary(buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte ranges [starts, ends) of `buffer` (disjoint, ascending) as an Arrow binary array."""
    return _variable_width(pa.binary(), np.frombuffer(buffer, np.uint8), starts, ends - starts)


def _bytes_like(arrow_type: pa.DataType, size: int | None = None) -> Decoder:
    def decode(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        if size is None:
            lengths, pos = _varint(buf, pos)
            if len(lengths) and lengths.min() < 0:
                raise MalformedDatum("a negative length")
        else:
            lengths = np.full(len(pos), size, np.int64)
        after = pos + lengths
        if (after > ends).any():
            raise MalformedDatum("a string or bytes longer than its datum")
        array = _variable_width(arrow_type, buf, pos, lengths)
        if arrow_type == pa.string():
            try:
                array.validate(full=True)  # UTF-8
            except pa.ArrowInvalid as exc:
                raise MalformedDatum(f"a string that is not UTF-8: {exc}") from None
        return array, after

    return decode


def _enum(symbols: list[str]) -> Decoder:
    dictionary = pa.array(symbols, pa.string())

    def decode(buf: np.ndarray, pos: np.ndarray, _ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        index, pos = _varint(buf, pos)
        if len(index) and (index.min() < 0 or index.max() >= len(symbols)):
            raise MalformedDatum("an enum index out of range")
        return dictionary.take(_numpy_array(index, pa.int64())), pos

    return decode


def _nullable(inner: Decoder, null_branch: int) -> Decoder:
    value_branch = 1 - null_branch

    def decode(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        branch, pos = _varint(buf, pos)
        if ((branch != 0) & (branch != 1)).any():
            raise MalformedDatum("a union index out of range")
        present = branch == value_branch
        if present.all():
            return inner(buf, pos, ends)
        where = np.flatnonzero(present)
        values, after = inner(buf, pos[where], ends[where])
        pos = pos.copy()
        pos[where] = after
        # Scatter the present values to their rows; the others null.
        slot = np.full(len(present), -1, np.int64)
        slot[where] = np.arange(len(where))
        validity = pa.py_buffer(np.packbits(present, bitorder="little"))
        indices = pa.Array.from_buffers(pa.int64(), len(slot), [validity, pa.py_buffer(slot)])
        return values.take(indices), pos

    return decode


_PRIMITIVE_DECODERS: dict[str, Callable[[], Decoder]] = {
    "boolean": lambda: _boolean,
    "int": lambda: _int(pa.int32()),
    "long": lambda: _int(pa.int64()),
    "float": lambda: _float(4, pa.float32()),
    "double": lambda: _float(8, pa.float64()),
    "string": lambda: _bytes_like(pa.string()),
    "bytes": lambda: _bytes_like(pa.binary()),
}


def _field_decoder(schema: Any) -> Decoder | None:
    if isinstance(schema, list):
        if len(schema) != 2 or "null" not in schema:
            return None
        inner = _field_decoder(schema[1 - schema.index("null")])
        return None if inner is None else _nullable(inner, schema.index("null"))
    if isinstance(schema, str):
        make = _PRIMITIVE_DECODERS.get(schema)
        return None if make is None else make()
    if isinstance(schema, dict) and "logicalType" not in schema:
        kind = schema.get("type")
        if kind == "enum":
            return _enum(list(schema["symbols"]))
        if kind == "fixed":
            return _bytes_like(pa.binary(), int(schema["size"]))
        if isinstance(kind, str) and kind in _PRIMITIVE_DECODERS:
            return _PRIMITIVE_DECODERS[kind]()
    return None


def plan(schema: Any, single_name: str) -> list[tuple[str, Decoder]] | None:
    """The fields' decoders, in the datum's order (a non-record schema: one field, `single_name`); None if the
    schema has a type this module does not decode."""
    if isinstance(schema, dict) and schema.get("type") == "record":
        fields = [(f["name"], f["type"]) for f in schema.get("fields", [])]
    else:
        fields = [(single_name, schema)]
    decoders = []
    for name, field_schema in fields:
        decoder = _field_decoder(field_schema)
        if decoder is None:
            return None
        decoders.append((name, decoder))
    return decoders


def decode(fields: list[tuple[str, Decoder]], buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> dict[str, Any]:
    """The datums at [starts, ends) of `buffer`, decoded: an Arrow array per field."""
    buf = np.frombuffer(buffer + bytes(PADDING), np.uint8)
    pos = starts.astype(np.int64)
    ends = ends.astype(np.int64)
    columns: dict[str, pa.Array] = {}
    for name, decoder in fields:
        if (pos > ends).any():
            raise MalformedDatum(f"a datum that ends before its field '{name}'")
        columns[name], pos = decoder(buf, pos, ends)
    if (pos != ends).any():
        raise MalformedDatum("a datum longer or shorter than its schema's fields")
    return columns


def spans(items: list[bytes], skip: int = 0) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The items concatenated, and where each starts (after `skip` bytes of its own) and ends."""
    lengths = np.fromiter(map(len, items), np.int64, len(items))
    ends = np.cumsum(lengths)
    return b"".join(items), ends - lengths + skip, ends
