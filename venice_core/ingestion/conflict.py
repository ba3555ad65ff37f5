"""Deterministic conflict resolution for active-active writes, and the replication metadata it keeps per key.

Every region applies the nearline writes of every region's real-time topic, each region in its own interleaving.
They converge because the winner of two writes to one key is decided by the writes alone: the later write
timestamp wins; on equal timestamps the larger region name wins; two writes of one region with one timestamp are
seen by every region in that region's topic order, and the later one wins. A key never written nearline carries
the batch stamp (timestamp 0, no region), which any nearline write beats.

The metadata of the latest write of each key (timestamp, region, whether it was a delete) is stored beside the
value in the partition's storage (`PartitionStorage` keeps it in a column family of its own, in the same write as
the value): a delete leaves it behind as a tombstone, so a late older put cannot bring the key back.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Encoded stamp: a flags byte, the write timestamp as an unsigned big-endian number (offset from the signed range),
# then the writing region's name in UTF-8. Past the flags byte, byte order is (timestamp, region) order, so the
# ingestion hot path compares encoded stamps without decoding them.
_FLAGS_AND_TIME = struct.Struct(">BQ")
_TIME = struct.Struct(">Q")
_OFFSET = 1 << 63
_TOMBSTONE = 1


def encode_stamp(timestamp: int, region: bytes, tombstone: bool = False) -> bytes:
    return _FLAGS_AND_TIME.pack(_TOMBSTONE if tombstone else 0, timestamp + _OFFSET) + region


def stamp_wins(incoming: bytes, existing: bytes | None) -> bool:
    """Whether a write seen now replaces the key's latest write so far (None: batch data only, which any nearline
    write beats)."""
    return existing is None or incoming[1:] >= existing[1:]


@dataclass(frozen=True, slots=True)
class WriteStamp:
    """A stamp decoded, for people and tests."""

    timestamp: int
    region: str = ""
    tombstone: bool = False

    def encode(self) -> bytes:
        return encode_stamp(self.timestamp, self.region.encode(), self.tombstone)

    @classmethod
    def decode(cls, data: bytes) -> WriteStamp:
        flags, shifted = _FLAGS_AND_TIME.unpack_from(data)
        return cls(shifted - _OFFSET, data[_FLAGS_AND_TIME.size :].decode(), bool(flags & _TOMBSTONE))
