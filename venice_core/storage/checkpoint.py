"""Ingestion checkpoints: the typed topic-partition, the state's wire form, and the three-call checkpoint store.

As seed 002 settles it, a checkpoint store has exactly three calls, `get`, `set` and `delete`, on a
`PubSubTopicPartition` (a version topic or a view topic: never a real-time topic), and the state is opaque bytes
that the core serialises and evolves (`encode_state` / `decode_state`). One store holds several topics at once: a
new version's state never overwrites the old one's. The state carries a partition's offsets and DIV state and the
version-level fields a Da Vinci client needs (START_OF_PUSH's sorted, chunked and compression strategy;
END_OF_PUSH reached). The compression dictionary is left out: it can be large and is the same for every partition,
so a client fetches it from its region server (`GET /dictionary/<store>/<version>`).
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Protocol

# A version topic, `<prefix><store>_v<N>`, or one of its view topics, `<prefix><store>_v<N>_<view>` (Venice's
# change-capture `_cc` and materialized views `_<name>_mv`). Real-time topics (`_rt`) have no version and no place here.
_VERSIONED_TOPIC = re.compile(r"^(?P<base>.+)_v(?P<version>[0-9]+)(?:_(?P<view>[A-Za-z0-9][A-Za-z0-9_-]*))?$")

MAGIC = b"VPS"  # Venice partition state
STATE_VERSION = 1
_HEADER = struct.Struct(">3sBI")  # magic, state version, CRC32 of the body
# Not copied into the state: the dictionary (fetched from the region server) and what only a region server uses.
_LEFT_OUT_OF_SOP = ("compression_dictionary",)


class CorruptCheckpoint(ValueError):
    """A stored state that cannot be read back: the partition re-ingests from the start."""


@dataclass(frozen=True, order=True)
class PubSubTopicPartition:
    """A version or view topic and one of its partitions, the key of a checkpoint."""

    topic: str
    partition: int

    def __post_init__(self) -> None:
        if not isinstance(self.partition, int) or self.partition < 0:
            raise ValueError(f"partition must be a whole number >= 0, not {self.partition!r}")
        if _VERSIONED_TOPIC.match(self.topic or "") is None:
            raise ValueError(f"{self.topic!r} is not a version topic or a view topic (<store>_v<N>[_<view>])")

    @property
    def version(self) -> int:
        match = _VERSIONED_TOPIC.match(self.topic)
        assert match is not None
        return int(match["version"])

    @property
    def view(self) -> str | None:
        match = _VERSIONED_TOPIC.match(self.topic)
        assert match is not None
        return match["view"]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class CheckpointStore(Protocol):
    """Where ingestion keeps each partition's state, by topic-partition (seed 002's three calls)."""

    def get(self, topic_partition: PubSubTopicPartition) -> bytes | None: ...

    def set(self, topic_partition: PubSubTopicPartition, state: bytes) -> None: ...

    def delete(self, topic_partition: PubSubTopicPartition) -> None: ...


class InMemoryCheckpointStore:
    """The three calls over a dict: for tests, and clients that keep no state across restarts."""

    def __init__(self) -> None:
        self.states: dict[PubSubTopicPartition, bytes] = {}

    def get(self, topic_partition: PubSubTopicPartition) -> bytes | None:
        return self.states.get(topic_partition)

    def set(self, topic_partition: PubSubTopicPartition, state: bytes) -> None:
        self.states[topic_partition] = bytes(state)

    def delete(self, topic_partition: PubSubTopicPartition) -> None:
        self.states.pop(topic_partition, None)


def encode_state(state: dict[str, Any]) -> bytes:
    """The partition's checkpoint as opaque bytes: a header (magic, state version, CRC32) and a JSON body."""
    sop = state.get("sop")
    if isinstance(sop, dict) and any(k in sop for k in _LEFT_OUT_OF_SOP):
        state = {**state, "sop": {k: v for k, v in sop.items() if k not in _LEFT_OUT_OF_SOP}}
    body = json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
    return _HEADER.pack(MAGIC, STATE_VERSION, zlib.crc32(body)) + body


def decode_state(raw: bytes) -> dict[str, Any]:
    """The state `encode_state` wrote; `CorruptCheckpoint` if the bytes are not one (torn, altered, unknown)."""
    raw = bytes(raw)
    if raw[:1] == b"{":  # written before the state had a header: a plain JSON checkpoint
        try:
            return _checked(json.loads(raw))
        except ValueError as exc:
            raise CorruptCheckpoint(f"unreadable checkpoint: {exc}") from None
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
    try:
        return _checked(json.loads(body))
    except ValueError as exc:
        raise CorruptCheckpoint(f"unreadable checkpoint: {exc}") from None


def _checked(state: Any) -> dict[str, Any]:
    if not isinstance(state, dict) or not isinstance(state.get("next_offset"), int):
        raise CorruptCheckpoint("checkpoint has no next offset")
    return state


def version_fields(state: dict[str, Any]) -> dict[str, Any]:
    """The version-level fields a Da Vinci client reads from a partition's state."""
    sop = state.get("sop") or {}
    return {
        "sorted": bool(sop.get("sorted")),
        "chunked": bool(sop.get("chunked")),
        "compression": sop.get("compression") or "NO_OP",
        "end_of_push": bool(state.get("eop")),
    }
