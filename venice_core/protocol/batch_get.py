"""The binary body of a batch get (`POST /storage/<store>` with Content-Type `BATCH_CONTENT_TYPE`), as Venice's
multi-get is binary rather than JSON: no base64 or JSON on either side of the read path.

Request: for each key, a big-endian u32 length and the serialised key.
Response: for each requested key, in order, a big-endian i32 length (-1: no such key) and the record: the value's
schema id (i32) followed by the serialised, decompressed value.
"""

from __future__ import annotations

import struct

BATCH_CONTENT_TYPE = "application/x-venice-batch-get"
_LENGTH = struct.Struct(">i")
_MISSING = _LENGTH.pack(-1)


def encode_keys(keys: list[bytes]) -> bytes:
    pack = _LENGTH.pack
    return b"".join([pack(len(key)) + key for key in keys])


def decode_keys(body: bytes, limit: int) -> list[bytes]:
    """The keys of a request; ValueError names a malformed body, OverflowError a count over `limit`."""
    keys: list[bytes] = []
    offset, end = 0, len(body)
    unpack = _LENGTH.unpack_from
    while offset < end:
        if offset + 4 > end:
            raise ValueError(f"truncated key length at byte {offset}")
        (length,) = unpack(body, offset)
        offset += 4
        if length < 0 or offset + length > end:
            raise ValueError(f"key {len(keys)} of {length} bytes runs past the end of the body")
        keys.append(body[offset : offset + length])
        offset += length
        if len(keys) > limit:
            raise OverflowError(f"batch of more than {limit} keys")
    return keys


def encode_records(records: list[bytes | None]) -> bytes:
    pack = _LENGTH.pack
    return b"".join([_MISSING if r is None else pack(len(r)) + r for r in records])


def decode_records(body: bytes, count: int) -> list[tuple[int, bytes] | None]:
    """(schema id, value) or None per requested key; ValueError if the body does not hold `count` records."""
    out: list[tuple[int, bytes] | None] = []
    offset, end = 0, len(body)
    unpack = _LENGTH.unpack_from
    for _ in range(count):
        if offset + 4 > end:
            raise ValueError("batch get response ends early")
        (length,) = unpack(body, offset)
        offset += 4
        if length < 0:
            out.append(None)
            continue
        if length < 4 or offset + length > end:
            raise ValueError("batch get response holds a malformed record")
        out.append((unpack(body, offset)[0], body[offset + 4 : offset + length]))
        offset += length
    if offset != end:
        raise ValueError("batch get response holds more records than keys asked")
    return out
