"""The Da Vinci client's two local backends, RocksDB and DuckDB, through the interface the client uses
(`davinci.backend.LocalBackend`), with no broker: the same life of a version (ingested with its checkpoint, swapped
in, read, served again after a restart, retired by the next swap, dropped) reads the same in both, with checkpoints
beside the data or in a checkpoint store the transformer answers (seed 002's `get_storage_metadata_service`), and
what only DuckDB does is declared, not probed: RocksDB refuses SQL clearly and takes no ingest worker's commits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from venice_core.davinci.backend import LocalBackend, VersionStorage
from venice_core.davinci.client import local_backend
from venice_core.davinci.columns import SchemaNotStorable
from venice_core.davinci.duckdb_store import DuckDBPartitionStore, DuckDBRecordTransformer, RecordTransformer
from venice_core.davinci.schemas import StoreSchemas
from venice_core.errors import ConfigError
from venice_core.protocol import serde
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.partitioner import partition_for
from venice_core.storage.checkpoint import CheckpointStore, InMemoryCheckpointStore, PubSubTopicPartition
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.storage.rocksdb import CHECKPOINT_KEY, META_CF

STORE = "s"
PARTITIONS = 2
KEY = "string"
VALUE_V1 = {
    "type": "record",
    "name": "V",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": None}],
}
VALUE_V2 = {**VALUE_V1, "fields": [*VALUE_V1["fields"], {"name": "city", "type": ["null", "string"], "default": None}]}
ARRAY_KEY = {"type": "record", "name": "K", "fields": [{"name": "ids", "type": {"type": "array", "items": "long"}}]}


class OwnCheckpoints(RecordTransformer):
    """A transformer of the user's own that keeps the checkpoints (here in a dict): the records go to RocksDB."""

    def __init__(self) -> None:
        self.store = InMemoryCheckpointStore()

    def get_storage_metadata_service(self) -> CheckpointStore | None:
        return self.store


class DuckDBOwnCheckpoints(DuckDBRecordTransformer):
    """The DuckDB transformer with its checkpoints in a store other than its file's."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.store = InMemoryCheckpointStore()

    def get_storage_metadata_service(self) -> CheckpointStore | None:
        return self.store


def _topic(number: int) -> str:
    return f"dc-0.{STORE}_v{number}"


def _transformer(kind: str, tmp_path: Path) -> RecordTransformer | None:
    return {
        "rocksdb": lambda: None,
        "duckdb": lambda: DuckDBRecordTransformer(tmp_path / "c.duckdb"),
        "rocksdb+own-checkpoints": OwnCheckpoints,
        "duckdb+own-checkpoints": lambda: DuckDBOwnCheckpoints(tmp_path / "c.duckdb"),
    }[kind]()


@pytest.fixture(params=["rocksdb", "duckdb", "rocksdb+own-checkpoints", "duckdb+own-checkpoints"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalBackend[Any]]:
    opened = local_backend(_transformer(request.param, tmp_path), STORE, tmp_path, _topic)
    yield opened
    opened.close()


def _schemas() -> StoreSchemas:
    """The store's schemas as a started client has them."""
    return StoreSchemas(STORE, KEY, {1: VALUE_V1}, lambda: {1: VALUE_V1})


def _key(key: str) -> bytes:
    return serde.serialize(serde.parse(KEY), key)


def _ingest(version: VersionStorage, records: dict[str, dict[str, Any]], schema_id: int = 1) -> list[Any]:
    """Each partition's records in one commit with its checkpoint (END_OF_PUSH reached), as a task commits; the
    partitions' stores, open."""
    schema = {1: VALUE_V1, 2: VALUE_V2}[schema_id]
    stores = []
    for p in range(PARTITIONS):
        store = version.open_partition(p)
        batch = store.new_batch()
        for key, value in records.items():
            if partition_for(_key(key), PARTITIONS) == p:
                batch.put(_key(key), SCHEMA_ID.pack(schema_id) + serde.serialize(serde.parse(schema), value))
        store.commit(batch, IngestionCheckpoint(next_offset=10 + p, end_of_push=True))
        stores.append(store)
    return stores


def _swap_in(backend: LocalBackend[Any], version: VersionStorage) -> None:
    if not version.ready_to_serve:  # as the client does, outside its lock
        version.prepare_to_serve()
    assert version.ready_to_serve
    backend.swap(version)


def _close(stores: list[Any]) -> None:
    for store in stores:
        store.close()


def test_a_version_is_swapped_in_read_served_after_a_restart_and_retired_by_the_next(
    backend: LocalBackend[Any],
) -> None:
    assert backend.open(_schemas()) == 0  # nothing served yet
    v1 = backend.open_version(1, PARTITIONS, bytes)
    stores = _ingest(v1, {f"k{i}": {"name": f"n{i}", "age": i} for i in range(6)})
    _swap_in(backend, v1)
    assert backend.get("k3", _key("k3"), v1) == {"name": "n3", "age": 3}
    assert backend.get("absent", _key("absent"), v1) is None
    _close(stores)
    backend.close()

    # Restarted: v1 served at once, its partitions resume from their checkpoints.
    assert backend.open(_schemas()) == 1
    v1 = backend.open_version(1, PARTITIONS, bytes)
    stores = [v1.open_partition(p) for p in range(PARTITIONS)]
    assert [store.checkpoint().next_offset for store in stores] == [10, 11]
    assert backend.get("k4", _key("k4"), v1) == {"name": "n4", "age": 4}

    # The next version swapped in (v1's partitions closed first, as the client does): reads go to it, v1 is gone.
    v2 = backend.open_version(2, PARTITIONS, bytes)
    stores_v2 = _ingest(v2, {"k3": {"name": "v2", "age": None}})
    _close(stores)
    _swap_in(backend, v2)
    assert backend.get("k3", _key("k3"), v2) == {"name": "v2", "age": None}
    assert backend.get("k4", _key("k4"), v2) is None
    stores = [backend.open_version(1, PARTITIONS, bytes).open_partition(p) for p in range(PARTITIONS)]
    assert [store.checkpoint() for store in stores] == [None, None]  # v1 would be ingested from the start
    _close(stores)

    # A version the rollout abandoned is dropped whole.
    v3 = backend.open_version(3, PARTITIONS, bytes)
    _close(_ingest(v3, {"k1": {"name": "v3", "age": 1}}))
    backend.drop_version(3)
    stores = [backend.open_version(3, PARTITIONS, bytes).open_partition(p) for p in range(PARTITIONS)]
    assert [store.checkpoint() for store in stores] == [None, None]
    _close(stores + stores_v2)


def test_a_value_schema_registered_after_the_start_is_fetched_once_a_record_needs_it(
    backend: LocalBackend[Any],
) -> None:
    fetches: list[int] = []

    def fetch() -> dict[int, Any]:
        fetches.append(1)
        return {1: VALUE_V1, 2: VALUE_V2}

    schemas = StoreSchemas(STORE, KEY, {1: VALUE_V1}, fetch)
    backend.open(schemas)
    v1 = backend.open_version(1, PARTITIONS, bytes)
    stores = _ingest(v1, {"k": {"name": "n", "age": 1, "city": "Porto"}}, schema_id=2)
    _swap_in(backend, v1)
    assert backend.get("k", _key("k"), v1) == {"name": "n", "age": 1, "city": "Porto"}
    assert fetches and 2 in schemas.values
    _close(stores)


def test_rocksdb_refuses_sql_clearly_takes_any_key_and_no_ingest_worker_commits(tmp_path: Path) -> None:
    backend = local_backend(None, STORE, tmp_path, lambda number: f"dc-0.{STORE}_v{number}")
    assert backend.worker_commit_messages is None  # the workers' commits are DuckDB batches: threads ingest
    backend.check_key_schema(ARRAY_KEY)  # keyed by the serialised key: any key schema
    backend.open(_schemas())
    with pytest.raises(ConfigError, match="SQL needs the DuckDB transformer"):
        backend.sql("SELECT 1", [])


def test_duckdb_answers_sql_on_the_store_view_and_refuses_a_key_it_cannot_key_on(tmp_path: Path) -> None:
    transformer = DuckDBRecordTransformer(tmp_path / "c.duckdb")
    backend = local_backend(transformer, STORE, tmp_path, lambda number: f"dc-0.{STORE}_v{number}")
    assert backend.worker_commit_messages == DuckDBPartitionStore.commit_every_messages
    with pytest.raises(SchemaNotStorable, match="key field 'ids'"):
        backend.check_key_schema(ARRAY_KEY)
    assert list(tmp_path.iterdir()) == []  # refused before the file exists
    backend.open(_schemas())
    try:
        v1 = backend.open_version(1, PARTITIONS, bytes)
        stores = _ingest(v1, {f"k{i}": {"name": f"n{i}", "age": i} for i in range(6)})
        _swap_in(backend, v1)
        assert backend.sql(f'SELECT name FROM "{STORE}" WHERE age > ? ORDER BY name', [3]) == [("n4",), ("n5",)]
        _close(stores)
    finally:
        backend.close()


def _in_rocksdb(partition_dir: Path) -> bytes | None:
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(str(partition_dir / "db"), Options(raw_mode=True), column_families={META_CF: Options(raw_mode=True)},
               access_type=AccessType.read_only())  # fmt: skip
    try:
        return db.get_column_family(META_CF).get(CHECKPOINT_KEY)
    finally:
        db.close()


@pytest.mark.parametrize("kind", ["rocksdb+own-checkpoints", "duckdb+own-checkpoints"])
def test_a_transformers_checkpoint_store_holds_every_state_and_a_dropped_version_leaves_none(
    tmp_path: Path, kind: str
) -> None:
    """What the transformer answers gets each partition's state (the data's storage none), is read back to resume, and
    loses a version's states when the version is retired by a swap or dropped."""
    transformer = _transformer(kind, tmp_path)
    assert isinstance(transformer, OwnCheckpoints | DuckDBOwnCheckpoints)
    states = transformer.store.states
    backend = local_backend(transformer, STORE, tmp_path, _topic)
    backend.open(_schemas())
    try:
        v1 = backend.open_version(1, PARTITIONS, bytes)
        stores = _ingest(v1, {f"k{i}": {"name": f"n{i}", "age": i} for i in range(6)})
        assert {tp: IngestionCheckpoint.decode(state).next_offset for tp, state in states.items()} == {
            PubSubTopicPartition(_topic(1), 0): 10,
            PubSubTopicPartition(_topic(1), 1): 11,
        }
        assert [store.checkpoint().next_offset for store in stores] == [10, 11]  # read back from the same store
        _close(stores)
        if kind.startswith("rocksdb"):
            assert [_in_rocksdb(tmp_path / f"{STORE}_v1" / f"p{p}") for p in range(PARTITIONS)] == [None, None]
        else:
            assert backend.sql("SELECT count(*) FROM venice_checkpoints", []) == [(0,)]
        _swap_in(backend, v1)
        v2 = backend.open_version(2, PARTITIONS, bytes)
        _close(_ingest(v2, {"k1": {"name": "v2", "age": 1}}))
        _swap_in(backend, v2)  # v1 retired
        assert sorted({tp.topic for tp in states}) == [_topic(2)]
        v3 = backend.open_version(3, PARTITIONS, bytes)
        _close(_ingest(v3, {"k1": {"name": "v3", "age": 1}}))
        backend.drop_version(3)  # abandoned by the rollout
        assert sorted({tp.topic for tp in states}) == [_topic(2)]
    finally:
        backend.close()
