"""What the ingestion engine writes through: one partition of one store-version, whatever holds it.

`ingestion.task.PartitionIngestionTask` and `ingestion.real_time.RealTimeIngestion` see only this interface: region
servers run them over RocksDB (`storage.rocksdb`), Da Vinci clients over RocksDB or DuckDB (`davinci.duckdb`). A
batch collects puts, deletes, staged chunks and write stamps; `commit` applies it together with the checkpoint that
covers it, atomically, so a process killed at any point resumes with exactly the data its checkpoint covers.
"""

from __future__ import annotations

from typing import Any, Protocol


class WriteBatch(Protocol):
    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    # Optional: `put_many(keys, values)`, `put` of each in order, where a batch can take a run at once (read with
    # hasattr; ingestion calls `put` in a loop where it is missing, as for rocksdict's WriteBatch).


class PartitionStore(Protocol):
    # True where sorted pushes are written with `sst_put` and made visible by `ingest_sst` (RocksDB's SST ingestion);
    # elsewhere a sorted push is ingested like any other.
    sorted_ingest: bool
    # Optional: how often the batch phase commits, where a store wants other than `ingestion.task`'s
    # COMMIT_EVERY_MESSAGES / COMMIT_EVERY_SECONDS (read with getattr; RocksDB keeps the defaults).
    # commit_every_messages: int
    # commit_every_seconds: float

    def new_batch(self) -> WriteBatch: ...

    def checkpoint(self) -> dict[str, Any] | None:
        """The committed checkpoint (next offset, DIV state, START_OF_PUSH, END_OF_PUSH reached, ...), None at first;
        a checkpoint that cannot be read is logged and read as None: the partition re-ingests from the start."""

    def commit(self, batch: WriteBatch, checkpoint: dict[str, Any]) -> None:
        """Apply the batch and store the checkpoint that covers it, atomically."""

    # chunks of large values, staged until their manifest arrives
    def stage_chunk(self, batch: WriteBatch, chunk_key: bytes, value: bytes) -> None: ...

    def drop_chunk(self, batch: WriteBatch, chunk_key: bytes) -> None: ...

    def get_chunk(self, chunk_key: bytes) -> bytes | None: ...

    # replication metadata: each key's latest write stamp (`ingestion.conflict.WriteStamp`, encoded)
    def put_write_stamp(self, batch: WriteBatch, key: bytes, stamp: bytes) -> None: ...

    def get_write_stamp(self, key: bytes) -> bytes | None: ...

    # sorted ingestion (only where `sorted_ingest`)
    def sst_put(self, key: bytes, value: bytes) -> None: ...

    def ingest_sst(self) -> None: ...

    def close(self) -> None: ...

    def destroy(self) -> None:
        """Close and delete the partition's data and checkpoint."""
