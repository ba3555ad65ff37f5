"""Data integrity validation (DIV): per producer, segments of consecutive sequence numbers with a checksum.

The writer numbers every message it sends to a partition; a segment starts with START_OF_SEGMENT at sequence 0 and
ends with END_OF_SEGMENT carrying a CRC32 of the segment's data messages. The validator, run by ingestion, skips a
message it has already seen (a retried writer re-sends the same deterministic messages under the same GUID),
and raises on a gap or a checksum mismatch. Its state is plain JSON so it is checkpointed with the data.
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from venice_core.protocol.envelope import ControlMessageType, Message, ProducerMetadata, now_ms


class DataIntegrityError(Exception):
    """Missing or corrupt data in a partition."""


def deterministic_guid(*parts: object) -> bytes:
    """A producer GUID derived from a job-level id, so that a retried writer has the same identity."""
    return uuid.uuid5(uuid.NAMESPACE_URL, "venice:" + "/".join(str(p) for p in parts)).bytes


@dataclass
class SegmentState:
    """The sending side of one producer in one partition."""

    guid: bytes
    segment: int = -1
    sequence: int = -1
    checksum: int = 0

    def next(self) -> ProducerMetadata:
        self.sequence += 1
        return ProducerMetadata(self.guid, self.segment, self.sequence, now_ms())

    def start_segment(self) -> ProducerMetadata:
        self.segment += 1
        self.sequence = -1
        self.checksum = 0
        return self.next()

    def add(self, checksum_data: bytes) -> None:
        self.checksum = zlib.crc32(checksum_data, self.checksum)


class Validator:
    """The receiving side, for one partition: state per producer GUID (hex)."""

    def __init__(self, state: dict[str, dict[str, Any]] | None = None) -> None:
        self.producers: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (state or {}).items()}

    def state(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self.producers.items()}

    def accept(self, message: Message, checksum_data: bytes | None) -> bool:
        """True if the message is new and valid; False for a duplicate; DataIntegrityError otherwise."""
        p = message.producer
        guid = p.guid.hex()
        known = self.producers.get(guid)
        starts_segment = message.control_type is ControlMessageType.START_OF_SEGMENT and p.sequence == 0
        if known is None:
            if not starts_segment:
                raise DataIntegrityError(
                    f"missing data: first message from producer {guid[:8]} is segment {p.segment} sequence "
                    f"{p.sequence}, not the start of a segment"
                )
            self.producers[guid] = {"segment": p.segment, "sequence": 0, "checksum": 0, "ended": False}
            return True
        if p.segment < known["segment"] or (p.segment == known["segment"] and p.sequence <= known["sequence"]):
            return False
        if p.segment > known["segment"]:
            if not starts_segment:
                raise DataIntegrityError(
                    f"missing data: producer {guid[:8]} jumped to segment {p.segment} sequence {p.sequence} "
                    f"from segment {known['segment']} sequence {known['sequence']}"
                )
            known.update(segment=p.segment, sequence=0, checksum=0, ended=False)
            return True
        if p.sequence != known["sequence"] + 1:
            raise DataIntegrityError(
                f"missing data: producer {guid[:8]} segment {p.segment} jumped from sequence {known['sequence']} "
                f"to {p.sequence}"
            )
        if known["ended"]:
            raise DataIntegrityError(f"producer {guid[:8]} sent data after ending segment {p.segment}")
        known["sequence"] = p.sequence
        if message.control_type is ControlMessageType.END_OF_SEGMENT:
            expected = message.control.get("checksum")
            if expected != known["checksum"]:
                raise DataIntegrityError(
                    f"corrupt data: producer {guid[:8]} segment {p.segment} checksum {known['checksum']} does not "
                    f"match END_OF_SEGMENT's {expected}"
                )
            known["ended"] = True
        elif checksum_data is not None:
            known["checksum"] = zlib.crc32(checksum_data, known["checksum"])
        return True
