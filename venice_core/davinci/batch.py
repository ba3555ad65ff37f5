"""A DuckDB partition's batch: the writes of one commit as ingestion hands them over. It needs neither DuckDB nor
Arrow, so a client's ingestion worker (`ingest_worker`) builds it in a process of its own and the client's process
commits it (`duckdb_store.DuckDBPartitionStore.commit`); it crosses between them pickled, its runs as one buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from venice_core.protocol.put_run import PutRun

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class InPlace:
    """A commit's records where they lie: each key's bytes and each stored record's (schema id, value) as ranges of
    one buffer, in the order they came."""

    buffer: bytes
    key_starts: np.ndarray
    key_ends: np.ndarray
    stored_starts: np.ndarray
    stored_ends: np.ndarray

    @classmethod
    def of(cls, keys: list[bytes], records: list[bytes]) -> InPlace:
        from venice_core.davinci.arrow_decode import spans

        key_buffer, key_starts, key_ends = spans(keys)
        buffer, starts, ends = spans(records)
        shift = len(key_buffer)
        return cls(key_buffer + buffer, key_starts, key_ends, starts + shift, ends + shift)

    @classmethod
    def of_runs(cls, runs: list[PutRun]) -> InPlace:
        shifts = np.cumsum([0] + [len(run.checksummed) for run in runs[:-1]])
        pairs = list(zip(runs, shifts, strict=True))
        return cls(
            b"".join(run.checksummed for run in runs),
            np.concatenate([run.key_starts + 1 + shift for run, shift in pairs]),  # after the key's type byte
            np.concatenate([run.key_ends + shift for run, shift in pairs]),
            np.concatenate([run.stored_starts + shift for run, shift in pairs]),
            np.concatenate([run.stored_ends + shift for run, shift in pairs]),
        )

    def keys(self) -> pa.Array:
        """The keys' bytes as an Arrow binary array."""
        from venice_core.davinci import arrow_decode

        return arrow_decode.binary(self.buffer, self.key_starts, self.key_ends)

    def pairs(self) -> tuple[list[bytes], list[bytes]]:
        """The keys and the stored records, one Python object each."""
        buffer = self.buffer
        keys = [buffer[s:e] for s, e in zip(self.key_starts.tolist(), self.key_ends.tolist(), strict=True)]
        stored = [buffer[s:e] for s, e in zip(self.stored_starts.tolist(), self.stored_ends.tolist(), strict=True)]
        return keys, stored


class DuckDBBatch:
    """The writes of one commit, the latest per key: a put after a delete of the key replaces it, and so on.

    Runs of PUTs (`protocol.put_run`) are kept as they came, read in place at the commit, as long as nothing else
    came: a put or a delete first turns them into the per-key dict."""

    __slots__ = ("puts", "deletes", "chunks", "dropped_chunks", "stamps", "runs", "in_place")

    def __init__(self) -> None:
        self.puts: dict[bytes, bytes] = {}
        self.deletes: set[bytes] = set()
        self.chunks: dict[bytes, bytes] = {}
        self.dropped_chunks: set[bytes] = set()
        self.stamps: dict[bytes, bytes] = {}
        self.runs: list[PutRun] = []
        self.in_place: InPlace | None = None  # the runs, once pickled (one buffer)

    def put(self, key: bytes, value: bytes) -> None:
        if self.runs or self.in_place:
            self.flatten()
        self.puts[bytes(key)] = bytes(value)
        self.deletes.discard(key)

    def delete(self, key: bytes) -> None:
        if self.runs or self.in_place:
            self.flatten()
        self.puts.pop(key, None)
        self.deletes.add(bytes(key))

    def put_many(self, keys: list[bytes], values: list[bytes]) -> None:
        if self.runs or self.in_place:
            self.flatten()
        if self.deletes:
            self.deletes.difference_update(keys)
        self.puts.update(zip(keys, values, strict=True))

    def put_run(self, run: PutRun) -> None:
        if self.puts or self.deletes or self.in_place:
            self.put_many(run.keys(), run.stored())
        else:
            self.runs.append(run)

    def flatten(self) -> None:
        """The runs into the per-key dict (the latest put of a key wins), in order."""
        runs, self.runs = self.runs, []
        in_place, self.in_place = self.in_place, None
        if in_place is not None:
            self.put_many(*in_place.pairs())
        for run in runs:
            self.put_many(run.keys(), run.stored())

    def stage_chunk(self, chunk_key: bytes, value: bytes) -> None:
        self.chunks[bytes(chunk_key)] = bytes(value)
        self.dropped_chunks.discard(chunk_key)

    def drop_chunk(self, chunk_key: bytes) -> None:
        self.chunks.pop(chunk_key, None)
        self.dropped_chunks.add(bytes(chunk_key))

    def put_write_stamp(self, key: bytes, stamp: bytes) -> None:
        self.stamps[bytes(key)] = bytes(stamp)

    def __getstate__(self) -> tuple[Any, ...]:
        in_place = self.in_place or (InPlace.of_runs(self.runs) if self.runs else None)
        return self.puts, self.deletes, self.chunks, self.dropped_chunks, self.stamps, in_place

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.puts, self.deletes, self.chunks, self.dropped_chunks, self.stamps, self.in_place = state
        self.runs = []
