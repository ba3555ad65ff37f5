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
from itertools import chain

import numpy as np

from venice_core.protocol import ranges
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
    """A run's messages as one buffer, `kafka key, kafka value` after one another, and where each part lies in it:
    stores that take a run as a whole (DuckDB) read the records in place, others take them one by one (`keys`,
    `stored`)."""

    buffer: bytes
    key_starts: np.ndarray  # each Kafka key (its type byte first)
    key_ends: np.ndarray
    value_starts: np.ndarray  # each Kafka value (its header first)
    value_ends: np.ndarray
    guid: bytes
    segment: int
    first_sequence: int
    last_sequence: int
    checksummed: memoryview  # each message's Kafka key and its value after the header, in order: what DIV's CRC covers

    def __len__(self) -> int:
        return len(self.key_starts)

    def keys(self) -> list[bytes]:
        """The records' keys (the Kafka keys without their type byte)."""
        buffer = self.buffer
        return [buffer[s:e] for s, e in zip((self.key_starts + 1).tolist(), self.key_ends.tolist(), strict=True)]

    def stored(self) -> list[bytes]:
        """Each record as storage keeps it: schema id, then the value."""
        buffer = self.buffer
        starts = (self.value_starts + HEADER.size).tolist()
        return [buffer[s:e] for s, e in zip(starts, self.value_ends.tolist(), strict=True)]


def put_run(
    kafka_keys: list[bytes],
    kafka_values: list[bytes],
    keep_stamps: bool,
    continues: Callable[[bytes, int, int], bool],
) -> PutRun | None:
    """The messages as one run of PUTs, or None if they are not one (see the module's docstring). `keep_stamps`: the
    caller keeps write stamps, so a run must carry only batch write timestamps (0). `continues(guid, segment,
    first sequence)`: whether the run would be the next messages of an open segment (`Validator.continues`); asked
    before the run's checksummed bytes are gathered, so a run DIV would not take costs little."""
    count = len(kafka_values)
    if not count or len(kafka_keys) != count:
        return None
    # One buffer, key and value after one another: every step below is a numpy step over it, none per message.
    buffer = b"".join(chain.from_iterable(zip(kafka_keys, kafka_values, strict=True)))
    lengths = np.empty(2 * count, np.int64)
    lengths[0::2] = np.fromiter(map(len, kafka_keys), np.int64, count)
    lengths[1::2] = np.fromiter(map(len, kafka_values), np.int64, count)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    key_starts, key_ends, value_starts, value_ends = starts[0::2], ends[0::2], starts[1::2], ends[1::2]
    if lengths[1::2].min() < DATA_PREFIX.size or lengths[0::2].min() < 1:
        return None
    data = np.frombuffer(buffer, np.uint8)
    if (data[key_starts] != _DATA_TYPE).any():
        return None
    heads = data[value_starts[:, None] + np.arange(DATA_PREFIX.size)]
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
    # The checksummed bytes: the buffer without the values' headers.
    kept_starts = np.empty(count + 1, np.int64)
    kept_starts[0], kept_starts[1:] = 0, value_starts + HEADER.size
    kept_ends = np.empty(count + 1, np.int64)
    kept_ends[:-1], kept_ends[-1] = value_starts, len(buffer)
    return PutRun(
        buffer=buffer,
        key_starts=key_starts,
        key_ends=key_ends,
        value_starts=value_starts,
        value_ends=value_ends,
        guid=guid,
        segment=segment,
        first_sequence=first_sequence,
        last_sequence=int(sequences[-1]),
        checksummed=ranges.joined(buffer, kept_starts, kept_ends),
    )
