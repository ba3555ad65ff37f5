"""A run of PUT messages taken apart at once: ingestion's hot path for a consumed batch of a push.

A push's version topic is, between its control messages, a long run of PUTs from one producer segment with
consecutive sequence numbers. Taking each message apart in Python (one unpack, one DIV check, one batch put) costs
microseconds a record; a run is checked with a few numpy steps over its headers instead, and the segment checksum
is updated with one CRC over the run's checksummed bytes. Anything else (a control message, a DELETE, a chunk, a
second producer, a gap in sequence numbers, a write timestamp to keep) is not a run: `put_run` answers None and
the caller takes the messages one at a time, so every verdict stays the per-message path's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from venice_core.protocol.envelope import DATA_PREFIX, HEADER, KEY_TYPE_DATA, PROTOCOL_VERSION, MessageType

# The data prefix's fields (`envelope.DATA_PREFIX`, big-endian) as a numpy record: a run's headers in one view.
_PREFIX = np.dtype(
    [
        ("version", "u1"),
        ("type", "u1"),
        ("guid", "V16"),
        ("segment", ">i4"),
        ("sequence", ">i4"),
        ("timestamp", ">i8"),
        ("schema_id", ">i4"),
    ]
)
assert _PREFIX.itemsize == DATA_PREFIX.size
# The bytes every message of a run shares: protocol version, message type, producer GUID and segment (all that
# comes before the sequence number).
_SHARED = _PREFIX.fields["sequence"][1]
_DATA_TYPE = KEY_TYPE_DATA[0]


@dataclass(frozen=True, slots=True)
class PutRun:
    keys: list[bytes]  # the records' keys (the Kafka keys without their type byte)
    stored: list[bytes]  # each record as storage keeps it: schema id, then the value
    guid: bytes
    segment: int
    first_sequence: int
    last_sequence: int
    checksummed: bytes  # each message's Kafka key and its value after the header, in order: what DIV's CRC covers


def put_run(
    kafka_keys: list[bytes],
    kafka_values: list[bytes],
    keep_stamps: bool,
    continues: Callable[[bytes, int, int], bool],
) -> PutRun | None:
    """The messages as one run of PUTs, or None if they are not one (see the module's docstring). `keep_stamps`: the
    caller keeps write stamps, so a run must carry only batch write timestamps (0). `continues(guid, segment,
    first sequence)`: whether the run would be the next messages of an open segment (`Validator.continues`); asked
    before the run's values are copied, so a run DIV would not take costs only its headers."""
    count = len(kafka_values)
    if not count or len(kafka_keys) != count or min(map(len, kafka_values)) < DATA_PREFIX.size:
        return None
    heads = np.frombuffer(b"".join([value[: DATA_PREFIX.size] for value in kafka_values]), np.uint8)
    heads = heads.reshape(count, DATA_PREFIX.size)
    if not (heads[:, :_SHARED] == heads[0, :_SHARED]).all():
        return None  # another producer, segment or message type in the run
    prefix = heads.view(_PREFIX).reshape(-1)
    first = prefix[0]
    if first["version"] != PROTOCOL_VERSION or first["type"] != MessageType.PUT:
        return None
    if (prefix["schema_id"] < 0).any():
        return None  # chunks and manifests
    if keep_stamps and prefix["timestamp"].any():
        return None
    sequences = prefix["sequence"]
    first_sequence = int(sequences[0])
    if not (sequences == np.arange(first_sequence, first_sequence + count)).all():
        return None
    guid, segment = bytes(first["guid"]), int(first["segment"])
    if not continues(guid, segment, first_sequence):
        return None
    key_lengths = np.fromiter(map(len, kafka_keys), np.int64, count)
    if key_lengths.min() < 1:
        return None
    key_starts = np.cumsum(key_lengths) - key_lengths
    if (np.frombuffer(b"".join(kafka_keys), np.uint8)[key_starts] != _DATA_TYPE).any():
        return None
    stored = [value[HEADER.size :] for value in kafka_values]
    checksummed = b"".join([part for pair in zip(kafka_keys, stored, strict=True) for part in pair])
    return PutRun(
        keys=[key[1:] for key in kafka_keys],
        stored=stored,
        guid=guid,
        segment=segment,
        first_sequence=first_sequence,
        last_sequence=int(sequences[-1]),
        checksummed=checksummed,
    )
