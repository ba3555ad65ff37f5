"""What a partition's ingestion checkpoint holds (`IngestionCheckpoint`), and its wire form.

A checkpoint is committed with the data it covers (`storage.api.PartitionStore.commit`) and kept by the store as
opaque bytes (seed 002's `CheckpointStore`): a header (magic, state version, CRC32 of the body) and a JSON body. The
body's keys are the ones the first checkpoints were written with, so every stored checkpoint stays readable
(`tests/vectors/checkpoints_v1.json`); a new field is a new key that old checkpoints lack, read with a default. The
compression dictionary is left out: it can be large and is the same for every partition, so a client fetches it
from its region server (`GET /dictionary/<store>/<version>`).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.div import DivState

MAGIC = b"VPS"  # Venice partition state
STATE_VERSION = 1
_HEADER = struct.Struct(">3sBI")  # magic, state version, CRC32 of the body
_REAL_TIME_KEYS = ("rt", "rt_div", "rt_applied", "rt_ready")


class CorruptCheckpoint(ValueError):
    """A stored state that cannot be read back: the partition re-ingests from the start."""


@dataclass(frozen=True)
class StartOfPush:
    """What START_OF_PUSH says of a version's data, as a Da Vinci client needs it."""

    sorted: bool = False
    chunked: bool = False
    compression: CompressionStrategy = CompressionStrategy.NO_OP

    @classmethod
    def from_control(cls, control: Mapping[str, Any]) -> StartOfPush:
        """From START_OF_PUSH's body (its `compression_dictionary` left out); ValueError for an unknown
        compression."""
        return cls(
            sorted=bool(control.get("sorted")),
            chunked=bool(control.get("chunked")),
            compression=CompressionStrategy.parse(control.get("compression") or "NO_OP"),
        )

    def to_json(self) -> dict[str, Any]:
        return {"sorted": self.sorted, "chunked": self.chunked, "compression": self.compression.name}


@dataclass(frozen=True)
class RealTimeCheckpoint:
    """A hybrid version's real-time phase, after END_OF_PUSH."""

    offsets: Mapping[tuple[str, int], int]  # (real-time topic, partition) -> next offset
    div: DivState  # one validator over every region's writers (`Validator(join_mid_segment=True)`)
    applied: int = 0  # nearline writes applied
    ready: bool = False  # caught up once: a restart does not take a serving version's status back

    def to_json(self) -> dict[str, Any]:
        offsets: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in self.offsets.items():
            offsets.setdefault(topic, {})[str(partition)] = offset
        return {"rt": offsets, "rt_div": self.div, "rt_applied": self.applied, "rt_ready": self.ready}

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> RealTimeCheckpoint:
        offsets = {
            (topic, int(partition)): int(offset)
            for topic, by_partition in (state.get("rt") or {}).items()
            for partition, offset in by_partition.items()
        }
        div, applied, ready = state.get("rt_div") or {}, state.get("rt_applied") or 0, state.get("rt_ready")
        return cls(offsets, dict(div), int(applied), bool(ready))


@dataclass(frozen=True)
class IngestionCheckpoint:
    """How far a partition is ingested: what its store holds covers exactly this."""

    next_offset: int = 0  # in the region's version topic (a leader's: where it stopped following)
    div: DivState = field(default_factory=dict)  # the version topic's `protocol.div.Validator` state
    start_of_push: StartOfPush | None = None  # None until START_OF_PUSH is consumed
    end_of_push: bool = False
    records: int = 0  # PUTs stored from the version topic
    end_of_push_time_ms: int | None = None  # END_OF_PUSH's broker time: where a real-time replay rewinds from
    real_time: RealTimeCheckpoint | None = None
    # A leader outside the source region (`ingestion.leader`): the source region's version topic taken up to here.
    # None for a replica that last committed as a follower.
    upstream_next: int | None = None

    @property
    def sorted_push(self) -> bool:
        return self.start_of_push is not None and self.start_of_push.sorted

    def encode(self) -> bytes:
        """The opaque bytes a `CheckpointStore` keeps."""
        body = json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True).encode()
        return _HEADER.pack(MAGIC, STATE_VERSION, zlib.crc32(body)) + body

    @classmethod
    def decode(cls, raw: bytes) -> IngestionCheckpoint:
        """The checkpoint `encode` wrote; `CorruptCheckpoint` if the bytes are not one (torn, altered, unknown)."""
        raw = bytes(raw)
        if raw[:1] == b"{":  # written before the state had a header: a plain JSON checkpoint
            return cls._from_body(raw)
        if len(raw) < _HEADER.size:
            raise CorruptCheckpoint(f"checkpoint of {len(raw)} bytes is shorter than its header")
        magic, version, crc = _HEADER.unpack_from(raw)
        body = raw[_HEADER.size :]
        if magic != MAGIC:
            raise CorruptCheckpoint("checkpoint does not start with the partition state's magic bytes")
        if version > STATE_VERSION:
            raise CorruptCheckpoint(f"checkpoint state version {version} is newer than this code's {STATE_VERSION}")
        if zlib.crc32(body) != crc:
            raise CorruptCheckpoint("checkpoint checksum does not match its contents")
        return cls._from_body(body)

    def to_json(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "next_offset": self.next_offset,
            "div": self.div,
            "sop": None if self.start_of_push is None else self.start_of_push.to_json(),
            "eop": self.end_of_push,
            "records": self.records,
        }
        if self.end_of_push:
            state["eop_time_ms"] = self.end_of_push_time_ms
        if self.upstream_next is not None:
            state["upstream"] = self.upstream_next
        if self.real_time is not None:
            state.update(self.real_time.to_json())
        return state

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> IngestionCheckpoint:
        """ValueError, TypeError or AttributeError for a state that is not one."""
        sop = state.get("sop")
        end_of_push_time, upstream = state.get("eop_time_ms"), state.get("upstream")
        return cls(
            next_offset=int(state["next_offset"]),
            div=dict(state.get("div") or {}),
            start_of_push=None if sop is None else StartOfPush.from_control(sop),
            end_of_push=bool(state.get("eop")),
            records=int(state.get("records") or 0),
            end_of_push_time_ms=None if end_of_push_time is None else int(end_of_push_time),
            real_time=RealTimeCheckpoint.from_json(state) if any(k in state for k in _REAL_TIME_KEYS) else None,
            upstream_next=None if upstream is None else int(upstream),
        )

    @classmethod
    def _from_body(cls, body: bytes) -> IngestionCheckpoint:
        try:
            state = json.loads(body)
        except ValueError as exc:
            raise CorruptCheckpoint(f"unreadable checkpoint: {exc}") from None
        if not isinstance(state, dict) or not isinstance(state.get("next_offset"), int):
            raise CorruptCheckpoint("checkpoint has no next offset")
        try:
            return cls.from_json(state)
        except (ValueError, TypeError, AttributeError) as exc:  # a field of the wrong type
            raise CorruptCheckpoint(f"unreadable checkpoint: {exc}") from None
