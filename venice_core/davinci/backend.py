"""What a Da Vinci client needs of its local storage, whichever holds the copy: RocksDB (`rocksdb_backend`, without a
transformer) or DuckDB (`duckdb_backend`, with `DuckDBRecordTransformer`). The client picks one when it is built and
goes through `LocalBackend` only.

A backend holds the versions the client ingests (`VersionStorage`: an ingestion target per partition), knows which
version reads go to across restarts, swaps it, and answers reads. What only one backend can do is declared here too:
`sql` raises a `VeniceError` where it is not supported, and `worker_commit_messages` is None where ingest workers
cannot commit into the backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner

if TYPE_CHECKING:
    from venice_core.davinci.schemas import StoreSchemas
    from venice_core.storage.api import PartitionStore


class VersionStorage(Protocol):
    """One version held locally."""

    def open_partition(self, partition: int) -> PartitionStore[Any]:
        """The partition's storage, opened (created the first time): what its ingestion task writes through."""
        ...

    @property
    def ready_to_serve(self) -> bool:
        """Whether an ingested version may be swapped in as it is; else `prepare_to_serve` first."""
        ...

    def prepare_to_serve(self) -> None:
        """What serving needs that ingestion left undone (DuckDB: a bulk-loaded table's primary key). It may take
        seconds, so the client calls it outside its lock, while reads of the version served go on."""
        ...


VersionT = TypeVar("VersionT", bound=VersionStorage)


class LocalBackend(Protocol[VersionT]):
    """A client's local storage: its versions (`VersionT`, each made by `open_version` of the same backend) and the one
    its reads go to."""

    @property
    def worker_commit_messages(self) -> int | None:
        """Where ingest workers (`ingest_worker`) may ingest a version's batch phase, how many messages each of their
        commits holds. Their commits arrive as `batch.DuckDBBatch`es, which only DuckDB's partitions apply; None:
        threads ingest every partition."""
        ...

    def check_key_schema(self, key_schema: Any) -> None:
        """Refuse a key schema the storage cannot key on; called before anything is created."""
        ...

    def open(self, schemas: StoreSchemas) -> int:
        """Open (or create) the storage, after the client's checks; the version served when it was last closed, 0 if
        none."""
        ...

    def close(self) -> None:
        """Close the storage (the client has closed every version's partitions)."""
        ...

    def open_version(
        self,
        number: int,
        partition_count: int,
        decompress: Callable[[bytes], bytes],
        partitioner: VenicePartitioner = DEFAULT_PARTITIONER,
    ) -> VersionT:
        """A version to ingest, opened where a previous run left it (its partitions resume from their checkpoints);
        `partitioner` is the version's, for storage that finds a key's partition."""
        ...

    def swap(self, version: VersionT, drop_retired: bool = True) -> None:
        """Send reads to the ingested `version`, for good (a restart serves it at once), and drop the version served
        before (whose partitions the client has closed), unless `drop_retired` is False: the region's servers still
        serve it, and a rollback may return to it."""
        ...

    def drop_version(self, number: int) -> None:
        """Delete everything kept for the version (its partitions closed): data, checkpoints, chunks, write stamps."""
        ...

    def get(self, key: Any, key_bytes: bytes, served: VersionT | None) -> Any | None:
        """The value of `key` (`key_bytes` serialised) in the version served: `served` if the client has it open. A
        record value as a dict of its fields; None if absent."""
        ...

    def sql(self, query: str, parameters: list[Any]) -> list[tuple[Any, ...]]:
        """The rows of a query on the local copy; a `VeniceError` where the storage takes no SQL."""
        ...
