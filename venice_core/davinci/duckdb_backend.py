"""A Da Vinci client's copy in DuckDB, its storage with a `DuckDBRecordTransformer`: the file's layout, its version
tables and partition stores are `duckdb_store`'s; reads and SQL go to the store's view, `"<store>"`, whichever version
it points to, on a cursor of the reading thread's own. Checkpoints go to the store the transformer answers
(`get_storage_metadata_service`, asked as each version is opened): its own checkpoint table, unless a subclass
answers another store (None: the table, beside the data)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import duckdb

from venice_core.davinci.columns import Column, key_columns, key_is_record, value_is_record
from venice_core.davinci.duckdb_store import DuckDBPartitionStore, DuckDBRecordTransformer, DuckDBVersionTable, quote
from venice_core.davinci.schemas import StoreSchemas
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner
from venice_core.storage.checkpoint import CheckpointStore, PubSubTopicPartition


class DuckDBVersion:
    """One version's table; its partitions commit into it, their checkpoints into `checkpoints` (None: the file's)."""

    def __init__(
        self, table: DuckDBVersionTable, topic: str, schemas: StoreSchemas, checkpoints: CheckpointStore | None
    ) -> None:
        self.table, self.topic, self.schemas, self.checkpoints = table, topic, schemas, checkpoints

    def open_partition(self, partition: int) -> DuckDBPartitionStore:
        topic_partition = PubSubTopicPartition(self.topic, partition)
        return DuckDBPartitionStore(self.table, topic_partition, self.schemas.registered, self.checkpoints)

    @property
    def ready_to_serve(self) -> bool:
        return self.table.keyed  # a bulk-loaded table has no primary key until `prepare_to_serve`

    def prepare_to_serve(self) -> None:
        self.table.ensure_keyed()


class DuckDBBackend:
    def __init__(self, transformer: DuckDBRecordTransformer, store: str, version_topic: Callable[[int], str]) -> None:
        self.transformer = transformer
        self.store = store
        self.version_topic = version_topic
        self._schemas: StoreSchemas | None = None
        self._key_columns: list[Column] = []  # the table's primary key
        self._reads = threading.local()
        # Versions whose checkpoints a store other than the file's keeps: its store and the version's partition
        # count, so that dropping the version deletes their states there too (the file's own go with the topic's rows).
        self._kept_elsewhere: dict[int, tuple[CheckpointStore, int]] = {}

    @property
    def worker_commit_messages(self) -> int:
        return DuckDBPartitionStore.commit_every_messages  # as the client's own tasks commit (read when asked)

    def check_key_schema(self, key_schema: Any) -> None:
        key_columns(key_schema)  # a key DuckDB cannot key on: SchemaNotStorable, before the file exists

    def open(self, schemas: StoreSchemas) -> int:
        self._schemas = schemas
        self._key_columns = key_columns(schemas.key)
        self.transformer.open()
        return self.transformer.current_version(self.store)

    def close(self) -> None:
        self.transformer.close()
        self._reads = threading.local()  # the reading threads' cursors closed with the connection

    def open_version(
        self,
        number: int,
        partition_count: int,
        decompress: Callable[[bytes], bytes],
        partitioner: VenicePartitioner = DEFAULT_PARTITIONER,  # unused: one table per version, keyed by the key
    ) -> DuckDBVersion:
        schemas = self._opened()
        table = self.transformer.open_version(self.store, number, schemas.key, schemas.values, decompress)
        checkpoints = self.transformer.get_storage_metadata_service()
        if checkpoints is not None and checkpoints is not self.transformer.checkpoints:
            self._kept_elsewhere[number] = (checkpoints, partition_count)
        return DuckDBVersion(table, self.version_topic(number), schemas, checkpoints)

    def swap(self, version: DuckDBVersion, drop_retired: bool = True) -> None:
        retired = self.transformer.swap(version.table, self.version_topic if drop_retired else None)
        if drop_retired and retired and retired != version.table.version:
            self._forget_elsewhere(retired)

    def drop_version(self, number: int) -> None:
        self.transformer.drop_version(self.store, number, self.version_topic(number))
        self._forget_elsewhere(number)

    def _forget_elsewhere(self, number: int) -> None:
        """Delete a dropped version's states from a store other than the file's (a version this process opened)."""
        kept = self._kept_elsewhere.pop(number, None)
        if kept is not None:
            store, partition_count = kept
            for partition in range(partition_count):
                store.delete(PubSubTopicPartition(self.version_topic(number), partition))

    def get(self, key: Any, key_bytes: bytes, served: DuckDBVersion | None) -> Any | None:
        # The view, not `served`'s table: a restarted client serves the version its file last served even where it
        # holds it no more (the region went on while it was down), until it has ingested the region's.
        schemas = self._opened()
        keys = self._key_columns
        values = [key[c.name] for c in keys] if key_is_record(schemas.key) else [key]
        where = " AND ".join(f"{quote(c.name)} = ?" for c in keys)
        cursor = self._cursor()
        row = cursor.execute(f"SELECT * FROM {quote(self.store)} WHERE {where}", values).fetchone()
        if row is None:
            return None
        names = [d[0] for d in cursor.description]
        key_names = {c.name for c in keys}
        value = {n: v for n, v in zip(names, row, strict=True) if n not in key_names}
        return value if value_is_record(schemas.newest_value) else value.get("value")

    def sql(self, query: str, parameters: list[Any]) -> list[tuple[Any, ...]]:
        return self._cursor().execute(query, parameters).fetchall()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cursor: duckdb.DuckDBPyConnection | None = getattr(self._reads, "cursor", None)
        if cursor is None:
            cursor = self._reads.cursor = self.transformer.cursor()
        return cursor

    def _opened(self) -> StoreSchemas:
        assert self._schemas is not None, "the backend is not open"
        return self._schemas
