"""A Da Vinci client's copy in RocksDB, its storage without the DuckDB transformer: one RocksDB per partition under
`<base dir>/<store>_v<N>/p<P>`, and `current.json` beside them, the version each store's reads go to, so a restart
serves it at once. Checkpoints are where the client's transformer says, asked as each version is opened
(`RecordTransformer.get_storage_metadata_service`, seed 002): in its checkpoint store, or, if it answers None (or
there is no transformer), in each partition's RocksDB as region servers keep them (`storage.rocksdb`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from venice_core.davinci.schemas import StoreSchemas
from venice_core.errors import ConfigError
from venice_core.protocol import serde
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner
from venice_core.storage.checkpoint import CheckpointStore, KeptElsewhere, PubSubTopicPartition
from venice_core.storage.rocksdb import PartitionStorage

if TYPE_CHECKING:
    from venice_core.davinci.duckdb_store import RecordTransformer

CURRENT_FILE = "current.json"


class RocksDBVersion:
    """One version's partitions; a read finds a key's partition as the push placed it."""

    def __init__(
        self,
        number: int,
        path: Path,
        topic: str,
        partition_count: int,
        decompress: Callable[[bytes], bytes],
        checkpoint_store: CheckpointStore | None = None,
        partitioner: VenicePartitioner = DEFAULT_PARTITIONER,
    ) -> None:
        self.number, self.path, self.topic = number, path, topic
        self.partition_count = partition_count
        self.decompress = decompress
        self.checkpoint_store = checkpoint_store  # the transformer's; None: in each partition's RocksDB
        self.partitioner = partitioner
        self.partitions: dict[int, PartitionStorage] = {}

    def open_partition(self, partition: int) -> PartitionStorage:
        store = self.checkpoint_store
        kept = None if store is None else KeptElsewhere(store, PubSubTopicPartition(self.topic, partition))
        storage = self.partitions[partition] = PartitionStorage(self.path / f"p{partition}", kept)
        return storage

    @property
    def ready_to_serve(self) -> bool:
        return True  # an ingested version is readable as it is

    def prepare_to_serve(self) -> None:
        return None

    def stored(self, key_bytes: bytes) -> bytes | None:
        """The key's stored record (schema id + compressed value); the client subscribes to the key's partition."""
        return self.partitions[self.partitioner.partition(key_bytes, self.partition_count)].get(key_bytes)


class RocksDBBackend:
    worker_commit_messages = None  # ingest workers' batches are DuckDB's: threads ingest

    def __init__(
        self,
        store: str,
        base_dir: Path,
        version_topic: Callable[[int], str],
        transformer: RecordTransformer | None = None,
    ) -> None:
        self.store = store
        self.base_dir = base_dir
        self.version_topic = version_topic
        self.transformer = transformer
        self._schemas: StoreSchemas | None = None

    def check_key_schema(self, key_schema: Any) -> None:
        return None  # keyed by the key's serialised bytes: any key schema

    def open(self, schemas: StoreSchemas) -> int:
        self._schemas = schemas
        return _served(self._current(), self.store)

    def close(self) -> None:
        return None  # nothing beside the partitions, which the client closes

    def open_version(
        self,
        number: int,
        partition_count: int,
        decompress: Callable[[bytes], bytes],
        partitioner: VenicePartitioner = DEFAULT_PARTITIONER,
    ) -> RocksDBVersion:
        return RocksDBVersion(
            number,
            self._version_dir(number),
            self.version_topic(number),
            partition_count,
            decompress,
            self._checkpoint_store(),
            partitioner,
        )

    def _checkpoint_store(self) -> CheckpointStore | None:
        """The transformer's checkpoint store, asked for each version ingested; None: in each partition's RocksDB."""
        return None if self.transformer is None else self.transformer.get_storage_metadata_service()

    def swap(self, version: RocksDBVersion, drop_retired: bool = True) -> None:
        current = self._current()
        retired = _served(current, self.store)
        current[self.store] = version.number
        path = self.base_dir / CURRENT_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(current))
        tmp.replace(path)
        if drop_retired and retired and retired != version.number:
            self.drop_version(retired)

    def drop_version(self, number: int) -> None:
        store = self._checkpoint_store()
        if store is not None:  # the states of the partitions held here (a folder each), in the transformer's store
            topic = self.version_topic(number)
            for folder in self._version_dir(number).glob("p*"):
                if folder.name[1:].isdigit():
                    store.delete(PubSubTopicPartition(topic, int(folder.name[1:])))
        shutil.rmtree(self._version_dir(number), ignore_errors=True)

    def get(self, key: Any, key_bytes: bytes, served: RocksDBVersion | None) -> Any | None:
        if served is None:
            return None
        raw = served.stored(key_bytes)
        if raw is None:
            return None
        assert self._schemas is not None
        (schema_id,) = SCHEMA_ID.unpack_from(raw)
        schema = self._schemas.value(schema_id)
        return serde.deserialize(serde.parse(schema), served.decompress(raw[SCHEMA_ID.size :]))

    def sql(self, query: str, parameters: list[Any]) -> list[tuple[Any, ...]]:
        raise ConfigError("SQL needs the DuckDB transformer")

    def _version_dir(self, number: int) -> Path:
        return self.base_dir / f"{self.store}_v{number}"

    def _current(self) -> dict[str, Any]:
        """The version each store's reads go to (one file for every store kept under the base dir); {} if unreadable."""
        try:
            current = json.loads((self.base_dir / CURRENT_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return current if isinstance(current, dict) else {}


def _served(current: dict[str, Any], store: str) -> int:
    try:
        return int(current.get(store, 0))
    except (TypeError, ValueError):
        return 0
