"""What the ingestion engine writes through: one partition of one store-version, whatever holds it.

`ingestion.task.PartitionIngestionTask` and `ingestion.real_time.RealTimeIngestion` see only this interface: region
servers run them over RocksDB (`storage.rocksdb`), Da Vinci clients over RocksDB or DuckDB (`davinci.duckdb_store`).
A batch collects puts, deletes, staged chunks and write stamps; `commit` applies it together with the checkpoint that
covers it, atomically, so a process killed at any point resumes with exactly the data its checkpoint covers.

Every store declares all of it: what differs between stores (how a run of PUTs enters a batch, how often the batch
phase commits, whether sorted pushes go through SST files) is a member each defines, not a method some lack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from venice_core.protocol.put_run import PutRun
    from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint

# How often the batch phase commits unless a store says otherwise: a region server's RocksDB.
COMMIT_EVERY_MESSAGES = 20_000
COMMIT_EVERY_SECONDS = 1.0
# A sorted push where the store ingests SST files (`sorted_ingest`): each commit ingests one file, and RocksDB's
# ingestion (a link, syncs, a new level-0 file; rocksdict holds the GIL through it) cost a region server a quarter of
# its Python time at a commit every 20,000 records. Fewer, larger files; a crash replays at most this much.
SORTED_COMMIT_EVERY_MESSAGES = 250_000
SORTED_COMMIT_EVERY_SECONDS = 5.0


class WriteBatch(Protocol):
    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...


Batch = TypeVar("Batch", bound=WriteBatch)


class PartitionStore(Protocol[Batch]):
    """A partition's storage, its batches of type `Batch`."""

    # True where sorted pushes are written with `sst_put` and made visible by `ingest_sst` (RocksDB's SST ingestion);
    # elsewhere a sorted push is ingested like any other.
    sorted_ingest: bool
    # How often the batch phase commits: after this many messages or this many seconds, whichever comes first
    # (`COMMIT_EVERY_MESSAGES` / `COMMIT_EVERY_SECONDS` where a store has no reason to differ).
    commit_every_messages: int
    commit_every_seconds: float

    def new_batch(self) -> Batch: ...

    def put_run(self, batch: Batch, run: PutRun) -> None:
        """A run of PUTs (`protocol.put_run`), as `put` of each in order would: at once where the batch can take it."""

    def checkpoint(self) -> IngestionCheckpoint | None:
        """The committed checkpoint, None at first; a checkpoint that cannot be read is logged and read as None: the
        partition re-ingests from the start."""

    def commit(self, batch: Batch, checkpoint: IngestionCheckpoint) -> None:
        """Apply the batch and store the checkpoint that covers it, atomically."""

    # chunks of large values, staged until their manifest arrives
    def stage_chunk(self, batch: Batch, chunk_key: bytes, value: bytes) -> None: ...

    def drop_chunk(self, batch: Batch, chunk_key: bytes) -> None: ...

    def get_chunk(self, chunk_key: bytes) -> bytes | None: ...

    # replication metadata: each key's latest write stamp (`ingestion.conflict.WriteStamp`, encoded)
    def put_write_stamp(self, batch: Batch, key: bytes, stamp: bytes) -> None: ...

    def get_write_stamp(self, key: bytes) -> bytes | None: ...

    # sorted ingestion (only where `sorted_ingest`)
    def sst_put(self, key: bytes, value: bytes) -> None: ...

    def sst_put_run(self, keys: list[bytes], values: list[bytes]) -> None:
        """`sst_put` of each, in order."""

    def ingest_sst(self) -> None: ...

    def close(self) -> None: ...

    def destroy(self) -> None:
        """Close and delete the partition's data and checkpoint."""
