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

from venice_core.protocol.envelope import BATCH_WRITE_TIMESTAMP

_STAMP = struct.Struct(">qB")  # write timestamp (ms), flags; then the writing region's name in UTF-8
_TOMBSTONE = 1


@dataclass(frozen=True, slots=True)
class WriteStamp:
    timestamp: int
    region: str = ""
    tombstone: bool = False

    def encode(self) -> bytes:
        return _STAMP.pack(self.timestamp, _TOMBSTONE if self.tombstone else 0) + self.region.encode()

    @classmethod
    def decode(cls, data: bytes) -> WriteStamp:
        timestamp, flags = _STAMP.unpack_from(data)
        return cls(timestamp, data[_STAMP.size :].decode(), bool(flags & _TOMBSTONE))


BATCH_STAMP = WriteStamp(BATCH_WRITE_TIMESTAMP)


def wins(incoming: WriteStamp, existing: WriteStamp) -> bool:
    """Whether a write seen now replaces the key's latest write so far."""
    if incoming.timestamp != existing.timestamp:
        return incoming.timestamp > existing.timestamp
    return incoming.region >= existing.region
