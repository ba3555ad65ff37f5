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
from operator import itemgetter

import numpy as np

from venice_core.protocol.envelope import DATA_PREFIX, HEADER, KEY_TYPE_DATA, PROTOCOL_VERSION, MessageType

# The data prefix's fields (`envelope.DATA_PREFIX`, big-endian) as a numpy record: a run's headers in one view.
PREFIX = np.dtype(
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
assert PREFIX.itemsize == DATA_PREFIX.size and PREFIX.fields is not None
# The bytes every message of a run shares: protocol version, message type, producer GUID and segment (all that
# comes before the sequence number).
_FIELDS = PREFIX.fields
assert _FIELDS is not None  # a structured dtype has fields
_SHARED: int = _FIELDS["sequence"][1]
_DATA_TYPE = KEY_TYPE_DATA[0]
# Slices taken of every message of a run, as C-level getters (`map` of them runs no Python bytecode per message).
_DATA_PREFIX = itemgetter(slice(0, DATA_PREFIX.size))
AFTER_HEADER = itemgetter(slice(HEADER.size, None))
_AFTER_KEY_TYPE = itemgetter(slice(1, None))


@dataclass(frozen=True, slots=True)
class PutRun:
    """A run's records, as lists (`keys`, `stored`) for stores that take them one by one (RocksDB), and as the one
    buffer DIV's CRC covers, each message's Kafka key then its stored record, for stores that read them in place
    (DuckDB): `key_starts`/`key_ends` and `stored_starts`/`stored_ends` say where each lies in it."""

    kafka_keys: list[bytes]
    stored_records: list[bytes]  # each record as storage keeps it: schema id, then the value
    checksummed: bytes
    key_starts: np.ndarray  # each Kafka key (its type byte first)
    key_ends: np.ndarray
    stored_starts: np.ndarray
    stored_ends: np.ndarray
    guid: bytes
    segment: int
    first_sequence: int
    last_sequence: int

    def __len__(self) -> int:
        return len(self.kafka_keys)

    def keys(self) -> list[bytes]:
        """The records' keys (the Kafka keys without their type byte)."""
        return list(map(_AFTER_KEY_TYPE, self.kafka_keys))

    def stored(self) -> list[bytes]:
        return self.stored_records


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
    if not count or len(kafka_keys) != count:
        return None
    heads = prefix_bytes(kafka_values)
    if heads is None:
        return None
    if not (heads[:, :_SHARED] == heads[0, :_SHARED]).all():
        return None  # another producer, segment or message type in the run
    prefix = heads.view(PREFIX).reshape(-1)
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
    stored = list(map(AFTER_HEADER, kafka_values))
    lengths = np.empty(2 * count, np.int64)
    lengths[0::2] = np.fromiter(map(len, kafka_keys), np.int64, count)
    lengths[1::2] = np.fromiter(map(len, stored), np.int64, count)
    if lengths[0::2].min() < 1:
        return None
    ends = np.cumsum(lengths)
    starts = ends - lengths
    checksummed = b"".join(chain.from_iterable(zip(kafka_keys, stored, strict=True)))
    if (np.frombuffer(checksummed, np.uint8)[starts[0::2]] != _DATA_TYPE).any():
        return None
    return PutRun(
        kafka_keys=kafka_keys,
        stored_records=stored,
        checksummed=checksummed,
        key_starts=starts[0::2],
        key_ends=ends[0::2],
        stored_starts=starts[1::2],
        stored_ends=ends[1::2],
        guid=guid,
        segment=segment,
        first_sequence=first_sequence,
        last_sequence=int(sequences[-1]),
    )


def prefix_bytes(kafka_values: list[bytes]) -> np.ndarray | None:
    """Each message's data prefix, a row of bytes each (`.view(PREFIX)` reads its fields); None if a message is too
    short to hold one (it is not a data message a run can hold)."""
    if not kafka_values or min(map(len, kafka_values)) < DATA_PREFIX.size:
        return None
    heads = np.frombuffer(b"".join(map(_DATA_PREFIX, kafka_values)), np.uint8)
    return heads.reshape(len(kafka_values), DATA_PREFIX.size)
