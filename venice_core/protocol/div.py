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

# A validator's state, plain JSON: per producer GUID (hex), its segment, sequence number, checksum and whether the
# segment ended (and `partial`: joined part-way through it).
DivState = dict[str, dict[str, Any]]


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

    def next(self, timestamp_ms: int | None = None) -> ProducerMetadata:
        """The next message's metadata, stamped with the record's write timestamp, or now (control messages)."""
        self.sequence += 1
        stamp = now_ms() if timestamp_ms is None else timestamp_ms
        return ProducerMetadata(self.guid, self.segment, self.sequence, stamp)

    def start_segment(self, timestamp_ms: int | None = None) -> ProducerMetadata:
        self.segment += 1
        self.sequence = -1
        self.checksum = 0
        return self.next(timestamp_ms)

    def add(self, checksum_data: bytes) -> None:
        self.checksum = zlib.crc32(checksum_data, self.checksum)


class Validator:
    """The receiving side, for one partition: state per producer GUID (hex)."""

    def __init__(self, state: DivState | None = None, join_mid_segment: bool = False) -> None:
        # `join_mid_segment`: a reader that starts part-way through a topic (a real-time replay from a rewind time)
        # meets producers in the middle of a segment: it takes each one from its first message on, and cannot check
        # that segment's checksum. Without it, such a first message is missing data.
        self.join_mid_segment = join_mid_segment
        self.producers: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (state or {}).items()}
        # The same state dicts keyed by the GUID's bytes: the hot path skips hexing the GUID of every message.
        self._by_guid: dict[bytes, dict[str, Any]] = {bytes.fromhex(k): v for k, v in self.producers.items()}

    def state(self) -> DivState:
        return {k: dict(v) for k, v in self.producers.items()}

    def forget(self, guid: bytes) -> None:
        """Drop one producer's state: its next message is taken as its first (`join_mid_segment`)."""
        self.producers.pop(guid.hex(), None)
        self._by_guid.pop(guid, None)

    def forget_ended(self, keep: int) -> None:
        """Drop the producers whose segment has ended, in the order they first appeared, all but the last `keep`.
        A real-time topic has a
        producer per writer (per micro-batch and partition, for a streaming job), so its state would otherwise grow
        without bound; a producer forgotten this long ago no longer replays."""
        ended = [guid for guid, known in self.producers.items() if known["ended"]]
        for guid in ended[: max(0, len(ended) - keep)]:
            del self.producers[guid]
            del self._by_guid[bytes.fromhex(guid)]

    @staticmethod
    def _end(known: dict[str, Any]) -> bool:
        known["ended"] = True
        return True

    def accept(self, message: Message, checksum_data: bytes | None) -> bool:
        """True if the message is new and valid; False for a duplicate; DataIntegrityError otherwise."""
        p = message.producer
        parts = None if checksum_data is None else (checksum_data,)
        return self._accept(p.guid, p.segment, p.sequence, message.control_type, message.control, parts)

    def accept_data(self, guid: bytes, segment: int, sequence: int, kafka_key: bytes, body: Any) -> bool:
        """`accept` for a data message given as its header fields, Kafka key and the value after the header
        (what the segment checksum covers), without building a Message: the ingestion hot path. The common case,
        the next sequence number of an open segment, is checked inline; anything else takes the general path,
        so the verdicts are exactly `accept`'s."""
        known = self._by_guid.get(guid)
        if known is None or segment != known["segment"] or sequence != known["sequence"] + 1 or known["ended"]:
            return self._accept(guid, segment, sequence, None, {}, (kafka_key, body))
        known["sequence"] = sequence
        known["checksum"] = zlib.crc32(body, zlib.crc32(kafka_key, known["checksum"]))
        return True

    def continues(self, guid: bytes, segment: int, sequence: int) -> bool:
        """Whether a data message would be the next of an open segment: `accept_data`'s common case."""
        known = self._by_guid.get(guid)
        return (
            known is not None
            and segment == known["segment"]
            and sequence == known["sequence"] + 1
            and not known["ended"]
        )

    def accept_run(self, guid: bytes, segment: int, first: int, last: int, checksummed: bytes | memoryview) -> bool:
        """`accept_data` for a run of data messages at once (`put_run.PutRun`: one producer's segment, sequence
        numbers `first`..`last` in order, `checksummed` their checksummed bytes concatenated). True if the run
        continues an open segment, as `accept_data` would accept each; False, with nothing changed, for anything
        else: the caller then takes the messages one at a time for their exact verdicts."""
        if not self.continues(guid, segment, first):
            return False
        known = self._by_guid[guid]
        known["sequence"] = last
        known["checksum"] = zlib.crc32(checksummed, known["checksum"])
        return True

    def _accept(
        self,
        guid_bytes: bytes,
        segment: int,
        sequence: int,
        control_type: ControlMessageType | None,
        control: dict[str, Any],
        checksum_parts: tuple[Any, ...] | None,
    ) -> bool:
        guid = guid_bytes.hex()
        known = self.producers.get(guid)
        starts_segment = control_type is ControlMessageType.START_OF_SEGMENT and sequence == 0
        if known is None:
            if not starts_segment and self.join_mid_segment:
                known = self.producers[guid] = {"segment": segment, "sequence": sequence, "checksum": 0, "ended": False}
                known["partial"] = True  # joined part-way: this segment's checksum cannot be checked
                self._by_guid[guid_bytes] = known
                return control_type is not ControlMessageType.END_OF_SEGMENT or self._end(known)
            if not starts_segment:
                raise DataIntegrityError(
                    f"missing data: first message from producer {guid[:8]} is segment {segment} sequence "
                    f"{sequence}, not the start of a segment"
                )
            known = self.producers[guid] = {"segment": segment, "sequence": 0, "checksum": 0, "ended": False}
            self._by_guid[guid_bytes] = known
            return True
        if segment < known["segment"] or (segment == known["segment"] and sequence <= known["sequence"]):
            return False
        if segment > known["segment"]:
            if not starts_segment:
                raise DataIntegrityError(
                    f"missing data: producer {guid[:8]} jumped to segment {segment} sequence {sequence} "
                    f"from segment {known['segment']} sequence {known['sequence']}"
                )
            known.update(segment=segment, sequence=0, checksum=0, ended=False, partial=False)
            return True
        if sequence != known["sequence"] + 1:
            raise DataIntegrityError(
                f"missing data: producer {guid[:8]} segment {segment} jumped from sequence {known['sequence']} "
                f"to {sequence}"
            )
        if known["ended"]:
            raise DataIntegrityError(f"producer {guid[:8]} sent data after ending segment {segment}")
        known["sequence"] = sequence
        if control_type is ControlMessageType.END_OF_SEGMENT:
            expected = control.get("checksum")
            if known.get("partial"):
                return self._end(known)
            if expected != known["checksum"]:
                raise DataIntegrityError(
                    f"corrupt data: producer {guid[:8]} segment {segment} checksum {known['checksum']} does not "
                    f"match END_OF_SEGMENT's {expected}"
                )
            known["ended"] = True
        elif checksum_parts is not None:
            checksum = known["checksum"]
            for part in checksum_parts:  # CRC32 streams: crc(a + b) == crc(b, crc(a))
                checksum = zlib.crc32(part, checksum)
            known["checksum"] = checksum
        return True
