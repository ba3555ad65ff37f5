"""The DuckDB record transformer: a Da Vinci client's store in one DuckDB file, its checkpoints inside it.

Layout of the file:
- a table per version, `"<store>_v<N>"`: key fields as the primary key, value fields as columns (`columns`);
- a view `"<store>"` on the current version's table, re-pointed at a swap (the retired table is dropped);
- `venice_checkpoints (topic, partition) -> state BLOB`: the seed's three calls (`DuckDBCheckpointStore`), the
  checkpoint store the transformer answers (`get_storage_metadata_service`);
- `venice_chunks` (large values' chunks awaiting their manifest) and `venice_rmd` (a hybrid version's write stamps);
- `venice_current (store) -> version`: the version the view points to, what a restarted client serves at once.

Ingestion writes through `DuckDBPartitionStore` (a `storage.api.PartitionStore`): a batch keeps the latest write per
key (DuckDB's `INSERT OR REPLACE` would keep the first of two rows with one key in a statement, silently), and its
commit applies the deletes and one Arrow upsert together with the partition's checkpoint row, in one transaction.
Commits of all partitions go through one connection, one at a time: DuckDB is one writer anyway, and its own
threads work inside each statement.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from venice_core.davinci import arrow_decode
from venice_core.davinci.batch import DuckDBBatch, InPlace
from venice_core.davinci.columns import (
    Column,
    SchemaNotStorable,
    key_columns,
    key_is_record,
    merge_value_columns,
    value_columns,
    value_is_record,
)
from venice_core.errors import ConfigError, VeniceError
from venice_core.protocol import serde
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.put_run import PutRun
from venice_core.storage.checkpoint import CheckpointStore, PubSubTopicPartition
from venice_core.storage.ingestion_checkpoint import CorruptCheckpoint, IngestionCheckpoint

log = logging.getLogger(__name__)

CHECKPOINTS = "venice_checkpoints"
CHUNKS = "venice_chunks"
RMD = "venice_rmd"
CURRENT = "venice_current"
# The batch phase's commits (see `DuckDBPartitionStore`); the real-time phase commits as `ingestion.real_time` does.
COMMIT_EVERY_MESSAGES = 50_000
COMMIT_EVERY_SECONDS = 5.0
# DuckDB checkpoints its WAL into the file once the WAL passes this: at its default (16 MB) a 1M-row ingest
# checkpoints the whole table and its primary-key index every few commits. The WAL is as durable as the file; a
# clean close checkpoints.
WAL_CHECKPOINT_THRESHOLD = "1GB"


class DuckDBFileBusy(VeniceError):
    exit_code = 2


def quote(identifier: str) -> str:
    """A DuckDB identifier, quoted: store names reach SQL only through this."""
    return '"' + identifier.replace('"', '""') + '"'


def version_table(store: str, version: int) -> str:
    return f"{store}_v{version}"


class DuckDBCheckpointStore:
    """Seed 002's three calls on the checkpoint table, on one connection (so inside its open transaction)."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._con = connection

    def get(self, topic_partition: PubSubTopicPartition) -> bytes | None:
        row = self._con.execute(
            f'SELECT state FROM {CHECKPOINTS} WHERE topic = ? AND "partition" = ?',
            [topic_partition.topic, topic_partition.partition],
        ).fetchone()
        return None if row is None else bytes(row[0])

    def set(self, topic_partition: PubSubTopicPartition, state: bytes) -> None:
        self._con.execute(
            f"INSERT OR REPLACE INTO {CHECKPOINTS} VALUES (?, ?, ?)",
            [topic_partition.topic, topic_partition.partition, bytes(state)],
        )

    def delete(self, topic_partition: PubSubTopicPartition) -> None:
        self._con.execute(
            f'DELETE FROM {CHECKPOINTS} WHERE topic = ? AND "partition" = ?',
            [topic_partition.topic, topic_partition.partition],
        )


class RecordTransformer:
    """What a Da Vinci client stores its records through. The default keeps them in RocksDB, one per partition.

    `get_storage_metadata_service` (seed 002) is where ingestion keeps every partition's checkpoint: the client's
    storage asks it for each version it ingests. A checkpoint store (`storage.checkpoint.CheckpointStore`, three
    calls on opaque bytes by topic-partition) gets every partition's state, read at a restart to resume from; None,
    the default, keeps them beside the data (in each partition's RocksDB, as region servers do)."""

    def get_storage_metadata_service(self) -> CheckpointStore | None:
        return None


class DuckDBRecordTransformer(RecordTransformer):
    """One DuckDB file per client (see the module's docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._checkpoints: DuckDBCheckpointStore | None = None

    def open(self) -> DuckDBRecordTransformer:
        """Open (or create) the file; the client calls it after its other checks, so a refused start leaves none."""
        if self._con is not None:
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = connect_file(
                self.path,
                read_only=False,
                when_held="by another process (a Da Vinci client or a DuckDB shell): stop it or use another file",
            )
        except (PermissionError, duckdb.PermissionException) as exc:
            raise ConfigError(f"cannot create DuckDB file {self.path}: {exc}") from None
        con.execute(f"SET checkpoint_threshold = '{WAL_CHECKPOINT_THRESHOLD}'")
        con.execute(
            f'CREATE TABLE IF NOT EXISTS {CHECKPOINTS} (topic VARCHAR, "partition" INTEGER, state BLOB, '
            'PRIMARY KEY (topic, "partition"))'
        )
        con.execute(
            f'CREATE TABLE IF NOT EXISTS {CHUNKS} (topic VARCHAR, "partition" INTEGER, chunk_key BLOB, value BLOB, '
            'PRIMARY KEY (topic, "partition", chunk_key))'
        )
        con.execute(f"CREATE TABLE IF NOT EXISTS {RMD} (topic VARCHAR, key BLOB, stamp BLOB, PRIMARY KEY (topic, key))")
        con.execute(f"CREATE TABLE IF NOT EXISTS {CURRENT} (store VARCHAR PRIMARY KEY, version INTEGER)")
        self._con, self._checkpoints = con, DuckDBCheckpointStore(con)
        return self

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise VeniceError(f"DuckDB file {self.path} is not open")
        return self._con

    @property
    def checkpoints(self) -> DuckDBCheckpointStore:
        self.con  # noqa: B018 - raises if not open
        assert self._checkpoints is not None
        return self._checkpoints

    def get_storage_metadata_service(self) -> CheckpointStore | None:
        """The checkpoint table in the file: a partition's commit writes its state in the data's transaction."""
        return self.checkpoints

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of the calling thread's own to the same database (reads run beside ingestion)."""
        return self.con.cursor()

    # versions
    def open_version(
        self,
        store: str,
        version: int,
        key_schema: Any,
        value_schemas: dict[int, Any],
        decompress: Callable[[bytes], bytes],
    ) -> DuckDBVersionTable:
        with self.lock:
            return DuckDBVersionTable(self, store, version, key_schema, value_schemas, decompress)

    def current_version(self, store: str) -> int:
        with self.lock:
            row = self.con.execute(f"SELECT version FROM {CURRENT} WHERE store = ?", [store]).fetchone()
        return 0 if row is None else int(row[0])

    def swap(self, table: DuckDBVersionTable, retired_topic: Callable[[int], str] | None) -> int:
        """Point the store's view at the version's table; drop the retired one (its topic named by `retired_topic`;
        None: keep it). Returns the retired version, 0 if none."""
        with self.lock:
            table.ensure_keyed()
            retired = self.current_version(table.store)
            self.con.execute("BEGIN")
            try:
                table.create_view(self.con)
                self.con.execute(f"INSERT OR REPLACE INTO {CURRENT} VALUES (?, ?)", [table.store, table.version])
                self.con.execute("COMMIT")
            except Exception:
                self.con.execute("ROLLBACK")
                raise
            if retired_topic is not None and retired and retired != table.version:
                self.drop_version(table.store, retired, retired_topic(retired))
            return retired

    def drop_version(self, store: str, version: int, topic: str) -> None:
        """The version's table and everything kept for its topic (checkpoints, chunks, write stamps)."""
        with self.lock:
            self.con.execute(f"DROP TABLE IF EXISTS {quote(version_table(store, version))}")
            for table in (CHECKPOINTS, CHUNKS, RMD):
                self.con.execute(f"DELETE FROM {table} WHERE topic = ?", [topic])

    def tables(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]

    def close(self) -> None:
        with self.lock:
            if self._con is not None:
                self._con.close()
                self._con = self._checkpoints = None


class DuckDBVersionTable:
    """One version's table: its columns, and the decoding of stored records (schema id + compressed Avro) into rows."""

    def __init__(
        self,
        owner: DuckDBRecordTransformer,
        store: str,
        version: int,
        key_schema: Any,
        value_schemas: dict[int, Any],
        decompress: Callable[[bytes], bytes],
    ) -> None:
        self.owner, self.store, self.version = owner, store, version
        self.name = version_table(store, version)
        self.key_schema = key_schema
        self.key_schema_json = json.dumps(key_schema)
        self.key_record = key_is_record(key_schema)
        self.keys = key_columns(key_schema)
        self.value_schemas = dict(value_schemas)
        self.decompress = decompress
        self.values: list[Column] = []
        self._parsed_key = serde.parse(key_schema)
        self._value_record: dict[int, bool] = {}
        # Batches decoded straight into Arrow (`arrow_decode`) where the schemas allow; else fastavro.
        self._key_plan = arrow_decode.plan(key_schema, self.keys[0].name)
        self._value_plans: dict[int, list[tuple[str, arrow_decode.Decoder]] | None] = {}
        existing = owner.con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main'",
            [self.name],
        ).fetchall()
        if existing:
            self.values = self._existing_value_columns(dict(existing))
            self.keyed = self._has_primary_key()
        else:
            # Made from the oldest schema and evolved in order below: a later schema that changes a column's type is
            # the one named.
            first = min(self.value_schemas) if self.value_schemas else None
            self.values = [] if first is None else self._fresh_values(self.value_schemas[first])
            definition = ", ".join(
                [f"{quote(c.name)} {c.sql_type} NOT NULL" for c in self.keys]
                + [f"{quote(c.name)} {c.sql_type}" for c in self.values]
            )
            # Without its primary key until `ensure_keyed`: a sorted push is bulk-loaded (see `DuckDBPartitionStore`).
            owner.con.execute(f"CREATE TABLE {quote(self.name)} ({definition})")
            self.keyed = False
        for schema_id in sorted(self.value_schemas):  # every known schema must fit, before anything is ingested
            self._fit(self.value_schemas[schema_id])

    def _has_primary_key(self) -> bool:
        row = self.owner.con.execute(
            "SELECT count(*) FROM duckdb_constraints() WHERE table_name = ? AND schema_name = 'main' "
            "AND constraint_type = 'PRIMARY KEY'",
            [self.name],
        ).fetchone()
        return bool(row and row[0])

    def ensure_keyed(self) -> None:
        """Give the table its primary key, once: at the first commit that needs it, at the latest at the swap.

        A bulk-loaded table holds each key once if its topic is partitioned by key (each partition's keys came in
        increasing order). One that is not (a key in two partitions) keeps one row of each key, as upserts in
        whatever order the partitions committed would have; a warning says so."""
        with self.owner.lock:
            if self.keyed:
                return
            con, name = self.owner.con, quote(self.name)
            keys = ", ".join(quote(c.name) for c in self.keys)
            started = time.perf_counter()
            try:
                con.execute(f"ALTER TABLE {name} ADD PRIMARY KEY ({keys})")
            except duckdb.ConstraintException:
                log.warning("table %s: a key came in more than one partition; one row of each kept", self.name)
                con.execute("BEGIN")
                try:
                    con.execute(f"CREATE TEMP TABLE venice_unique AS SELECT DISTINCT ON ({keys}) * FROM {name}")
                    con.execute(f"DELETE FROM {name}")
                    con.execute(f"INSERT INTO {name} SELECT * FROM venice_unique")
                    con.execute("DROP TABLE venice_unique")
                    con.execute("COMMIT")
                except Exception:
                    con.execute("ROLLBACK")
                    raise
                con.execute(f"ALTER TABLE {name} ADD PRIMARY KEY ({keys})")
            self.keyed = True
            log.info("table %s: primary key built in %.2fs", self.name, time.perf_counter() - started)

    def _fresh_values(self, schema: Any) -> list[Column]:
        return merge_value_columns([], value_columns(schema), self.keys)

    def _existing_value_columns(self, types: dict[str, str]) -> list[Column]:
        """The table as a previous run left it: columns in the table's order, typed by the schemas that made them."""
        by_name: dict[str, Column] = {}
        for schema_id in sorted(self.value_schemas):
            for column in value_columns(self.value_schemas[schema_id]):
                by_name.setdefault(column.name, column)
        key_names = {c.name for c in self.keys}
        return [by_name[name] for name in types if name not in key_names and name in by_name]

    def _fit(self, schema: Any) -> None:
        """Add the schema's new fields as columns; a changed type is `SchemaNotStorable` naming the column."""
        merged = merge_value_columns(self.values, value_columns(schema), self.keys)
        for column in merged[len(self.values) :]:
            self.owner.con.execute(f"ALTER TABLE {quote(self.name)} ADD COLUMN {quote(column.name)} {column.sql_type}")
            log.info("table %s: column %s %s added", self.name, column.name, column.sql_type)
        added = len(merged) > len(self.values)
        self.values = merged
        if added and self.owner.current_version(self.store) == self.version:
            self.create_view(self.owner.con)  # a view's columns are fixed when it is created

    def add_value_schema(self, schema_id: int, schema: Any) -> None:
        with self.owner.lock:
            self._fit(schema)
            self.value_schemas[schema_id] = schema

    def create_view(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute(f"CREATE OR REPLACE VIEW {quote(self.store)} AS SELECT * FROM {quote(self.name)}")

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.keys] + [c.name for c in self.values]

    # decoding
    def _value_plan(self, schema_id: int, schema: Any) -> list[tuple[str, arrow_decode.Decoder]] | None:
        if schema_id not in self._value_plans:
            self._value_plans[schema_id] = arrow_decode.plan(schema, "value")
        return self._value_plans[schema_id]

    def _arrow_table(self, columns: dict[str, pa.Array], names: list[Column], rows: int) -> pa.Table:
        arrays = {}
        for column in names:
            array = columns.get(column.name)
            if array is None:
                array = pa.nulls(rows, column.arrow_type)  # a field of another schema than the batch's
            elif array.type != column.arrow_type:
                array = array.cast(column.arrow_type)
            arrays[column.name] = array
        return pa.table(arrays)

    def key_rows(self, keys: list[bytes]) -> pa.Table:
        if self._key_plan is not None:
            columns = arrow_decode.decode(self._key_plan, *arrow_decode.spans(keys))
            return self._arrow_table(columns, self.keys, len(keys))
        decoded = serde.deserialize_many(self.key_schema_json, keys)
        if self.key_record:
            columns = {c.name: [k[c.name] for k in decoded] for c in self.keys}
        else:
            columns = {self.keys[0].name: decoded}
        return pa.table({c.name: pa.array(columns[c.name], c.arrow_type) for c in self.keys})

    def rows(self, keys: list[bytes], records: list[bytes], schema_for: Callable[[int], Any]) -> pa.Table:
        """Keys and their stored records (schema id + compressed value) as one Arrow table of the table's columns."""
        fast = self._rows_at_once(keys, records, schema_for)
        if fast is not None:
            return fast
        by_schema: dict[int, list[int]] = {}
        size = SCHEMA_ID.size
        unpack = SCHEMA_ID.unpack_from
        decompress = self.decompress
        payloads = []
        for index, record in enumerate(records):
            (schema_id,) = unpack(record)
            by_schema.setdefault(schema_id, []).append(index)
            payloads.append(record[size:] if decompress is bytes else decompress(record[size:]))
        values: list[Any] = [None] * len(records)
        for schema_id, indexes in by_schema.items():
            schema = self.value_schemas.get(schema_id)
            if schema is None:
                schema = schema_for(schema_id)
                self.add_value_schema(schema_id, schema)
            is_record = self._value_record.setdefault(schema_id, value_is_record(schema))
            decoded = serde.deserialize_many(json.dumps(schema), [payloads[i] for i in indexes])
            for i, value in zip(indexes, decoded, strict=True):
                values[i] = value if is_record else {"value": value}
        table = self.key_rows(keys)
        return self._append_values(table, values)

    def _rows_at_once(
        self, keys: list[bytes], records: list[bytes], schema_for: Callable[[int], Any]
    ) -> pa.Table | None:
        """`rows` for a batch of uncompressed records of one schema that `arrow_decode` decodes (the common case):
        all records at once, no Python object per record. None where it does not apply."""
        if self.decompress is not bytes or self._key_plan is None:
            return None
        return self.rows_in_place(InPlace.of(keys, records), schema_for)

    def rows_in_place(self, records: InPlace, schema_for: Callable[[int], Any]) -> pa.Table | None:
        """`_rows_at_once` of records read where they lie (`InPlace`); None where it does not apply."""
        if self.decompress is not bytes or self._key_plan is None:
            return None
        buffer, starts, ends = records.buffer, records.stored_starts, records.stored_ends
        if (ends - starts < SCHEMA_ID.size).any():
            return None  # the general path says what is wrong
        head = np.frombuffer(buffer, np.uint8)[starts[:, None] + np.arange(SCHEMA_ID.size)]
        ids = np.ascontiguousarray(head).view(">i4").reshape(-1)
        schema_id = int(ids[0])
        if not (ids == schema_id).all():
            return None
        schema = self.value_schemas.get(schema_id)
        if schema is None:
            schema = schema_for(schema_id)
            self.add_value_schema(schema_id, schema)
        fields = self._value_plan(schema_id, schema)
        if fields is None:
            return None
        values = arrow_decode.decode(fields, buffer, starts + SCHEMA_ID.size, ends)
        columns = arrow_decode.decode(self._key_plan, buffer, records.key_starts, records.key_ends)
        columns.update(values)
        return self._arrow_table(columns, self.keys + self.values, len(starts))

    def _append_values(self, table: pa.Table, values: list[Any]) -> pa.Table:
        for column in self.values:
            name = column.name
            data = [v.get(name) for v in values]
            if column.as_json:
                data = [None if d is None else json.dumps(d, default=json_default) for d in data]
            table = table.append_column(name, pa.array(data, column.arrow_type))
        return table


def connect_file(path: Path, read_only: bool, when_held: str) -> duckdb.DuckDBPyConnection:
    """A connection to the DuckDB file. One that another process holds (DuckDB locks a file it writes) is
    DuckDBFileBusy saying `when_held` (who may hold it, what to do); any other failure to open it, ConfigError."""
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        first = str(exc).splitlines()[0]
        if "lock" in str(exc).lower():
            raise DuckDBFileBusy(f"DuckDB file {path} is held {when_held} ({first})") from None
        raise ConfigError(f"cannot open DuckDB file {path}: {first}") from None


def json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


class DuckDBPartitionStore:
    """A `storage.api.PartitionStore` for one partition of a version's table."""

    sorted_ingest = False
    # Larger transactions than a region server's RocksDB commits: each DuckDB transaction has a fixed cost (Arrow
    # scan set-up, the WAL's sync) that 20,000-record batches pay 50 times for 1M records. Not much larger: while
    # one partition commits, the others wait for the file, and 200,000-record commits made the partitions all
    # commit at once and wait in turn (a 1M-record ingest: 6.8 s at 200,000, 5.7 s at 50,000).
    commit_every_messages = COMMIT_EVERY_MESSAGES
    commit_every_seconds = COMMIT_EVERY_SECONDS

    def __init__(
        self,
        table: DuckDBVersionTable,
        topic_partition: PubSubTopicPartition,
        schema_for: Callable[[int], Any],
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        self.table = table
        self.owner = table.owner
        self.topic_partition = topic_partition
        self.schema_for = schema_for
        # The file's own checkpoint table (None) takes the state in the data's transaction; another store (what a
        # subclass's `get_storage_metadata_service` answers) after the data's commit, so a crash between the two
        # replays what the older state covers.
        self.checkpoints: CheckpointStore = checkpoints or self.owner.checkpoints
        self._in_transaction = self.checkpoints is self.owner.checkpoints
        self._stamps: dict[bytes, bytes] | None = None  # the topic's write stamps, read at the first lookup
        # A plain INSERT costs DuckDB about a third less than INSERT OR REPLACE. A batch push's records are new keys
        # (a restart resumes after its checkpoint, whose data is in the table): commits try a plain INSERT until one
        # meets a key already in the table (a violation rolls the transaction back), then replace for good.
        self._inserts_only = True
        # Bulk loading: while the table has no primary key yet, a sorted push's batch phase appends to it without
        # one, as long as this partition's keys keep increasing from the start of the topic (so none repeats).
        # DuckDB appends to an unindexed table several times faster than it maintains the index row by row, and
        # then builds the index at once (1M rows: 0.8 s + 0.7 s, against 2.4 s). Anything else (a resumed
        # partition, a delete, a write stamp, a key out of order, the real-time phase) keys the table first.
        self._in_order = True
        self._last_key: bytes | None = None

    def new_batch(self) -> DuckDBBatch:
        return DuckDBBatch()

    def checkpoint(self) -> IngestionCheckpoint | None:
        with self.owner.lock:
            raw = self.checkpoints.get(self.topic_partition)
        if raw is None:
            return None
        self._in_order = False  # resuming: the keys committed before are not known here
        try:
            return IngestionCheckpoint.decode(raw)
        except CorruptCheckpoint as exc:
            log.warning(
                "checkpoint of %s is corrupt (%s): the partition re-ingests from the start", self.topic_partition, exc
            )
            return None

    def put_run(self, batch: DuckDBBatch, run: PutRun) -> None:
        batch.put_run(run)  # kept whole, read in place at the commit

    def commit(self, batch: DuckDBBatch, checkpoint: IngestionCheckpoint) -> None:
        # Decoded before the transaction (and the lock): the other partitions commit meanwhile.
        upserts: pa.Table | None = None
        first = last = None
        in_order = True
        in_place = batch.in_place or (InPlace.of_runs(batch.runs) if batch.runs else None)
        if in_place is not None:
            keys = in_place.keys()
            in_order = len(keys) < 2 or pc.all(pc.less(keys[:-1], keys[1:])).as_py()
            if in_order:  # each key once (a sorted push): the records go as they are
                first, last = keys[0].as_py(), keys[-1].as_py()
                upserts = self.table.rows_in_place(in_place, self.schema_for)
            if upserts is None:
                batch.flatten()  # the latest write per key, through the per-key dict
        if upserts is None and batch.puts:
            put_keys = list(batch.puts)
            in_order = all(map(bytes.__lt__, put_keys, put_keys[1:]))  # in the batch's order: each key's first put
            first, last = put_keys[0], put_keys[-1]
            upserts = self.table.rows(put_keys, list(batch.puts.values()), self.schema_for)
        bulk = self._bulk_loads(batch, in_order, first, checkpoint)
        if not bulk:
            self.table.ensure_keyed()
        deletes = self.table.key_rows(list(batch.deletes)) if batch.deletes else None
        with self.owner.lock:
            if bulk and not self.table.keyed:
                self._transaction(batch, checkpoint, upserts, None, replace=False)
                self._last_key = last or self._last_key
                return
            if self._inserts_only:
                try:
                    self._transaction(batch, checkpoint, upserts, deletes, replace=False)
                    return
                except duckdb.ConstraintException:
                    # A key already in the table: from now on (this partition's updates) INSERT OR REPLACE.
                    self._inserts_only = False
            self._transaction(batch, checkpoint, upserts, deletes, replace=True)

    def _bulk_loads(
        self, batch: DuckDBBatch, in_order: bool, first: bytes | None, checkpoint: IngestionCheckpoint
    ) -> bool:
        """Whether this commit appends to the unindexed table (see `__init__`); once not, never again. `in_order`:
        the batch's keys increase; `first`: its first key."""
        if not self._in_order or self.table.keyed:
            self._in_order = False
            return False
        last = self._last_key
        in_order = (
            in_order
            and checkpoint.sorted_push
            and not batch.deletes
            and not batch.stamps
            and (first is None or last is None or last < first)
        )
        # END_OF_PUSH's commit may still append; the real-time phase after it upserts.
        self._in_order = in_order and not checkpoint.end_of_push
        return in_order

    def _transaction(
        self,
        batch: DuckDBBatch,
        checkpoint: IngestionCheckpoint,
        upserts: pa.Table | None,
        deletes: pa.Table | None,
        replace: bool,
    ) -> None:
        """The batch and the checkpoint in one transaction (a failure rolls it all back and raises)."""
        con = self.owner.con
        tp = self.topic_partition
        name = quote(self.table.name)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        con.execute("BEGIN")
        try:
            if deletes is not None:
                con.register("venice_deletes", deletes)
                match = " AND ".join(f"{name}.{quote(c.name)} = d.{quote(c.name)}" for c in self.table.keys)
                con.execute(f"DELETE FROM {name} USING venice_deletes AS d WHERE {match}")
                con.unregister("venice_deletes")
            if upserts is not None:
                con.register("venice_upserts", upserts)
                columns = ", ".join(quote(c) for c in upserts.column_names)
                con.execute(f"{verb} INTO {name} ({columns}) SELECT {columns} FROM venice_upserts")
                con.unregister("venice_upserts")
            for chunk_key, value in batch.chunks.items():
                con.execute(
                    f"INSERT OR REPLACE INTO {CHUNKS} VALUES (?, ?, ?, ?)",
                    [tp.topic, tp.partition, chunk_key, value],
                )
            for chunk_key in batch.dropped_chunks:
                con.execute(
                    f'DELETE FROM {CHUNKS} WHERE topic = ? AND "partition" = ? AND chunk_key = ?',
                    [tp.topic, tp.partition, chunk_key],
                )
            if batch.stamps:
                stamps = pa.table(
                    {
                        "topic": pa.array([tp.topic] * len(batch.stamps), pa.string()),
                        "key": pa.array(list(batch.stamps), pa.binary()),
                        "stamp": pa.array(list(batch.stamps.values()), pa.binary()),
                    }
                )
                con.register("venice_stamps", stamps)
                con.execute(f"INSERT OR REPLACE INTO {RMD} SELECT topic, key, stamp FROM venice_stamps")
                con.unregister("venice_stamps")
            if self._in_transaction:
                self.checkpoints.set(tp, checkpoint.encode())
            con.execute("COMMIT")
        except Exception:
            with contextlib.suppress(duckdb.TransactionException):  # a failed COMMIT ended it itself
                con.execute("ROLLBACK")
            for view in ("venice_deletes", "venice_upserts", "venice_stamps"):
                with contextlib.suppress(duckdb.Error):
                    con.unregister(view)
            raise
        if not self._in_transaction:
            self.checkpoints.set(tp, checkpoint.encode())
        if self._stamps is not None:
            self._stamps.update(batch.stamps)

    # chunks
    def stage_chunk(self, batch: DuckDBBatch, chunk_key: bytes, value: bytes) -> None:
        batch.stage_chunk(chunk_key, value)

    def drop_chunk(self, batch: DuckDBBatch, chunk_key: bytes) -> None:
        batch.drop_chunk(chunk_key)

    def get_chunk(self, chunk_key: bytes) -> bytes | None:
        tp = self.topic_partition
        with self.owner.lock:
            row = self.owner.con.execute(
                f'SELECT value FROM {CHUNKS} WHERE topic = ? AND "partition" = ? AND chunk_key = ?',
                [tp.topic, tp.partition, chunk_key],
            ).fetchone()
        return None if row is None else bytes(row[0])

    # replication metadata
    def put_write_stamp(self, batch: DuckDBBatch, key: bytes, stamp: bytes) -> None:
        batch.put_write_stamp(key, stamp)

    def get_write_stamp(self, key: bytes) -> bytes | None:
        # Every nearline write looks its key's stamp up: a DuckDB query each would cost a millisecond, so the
        # partition's stamps are read once (they are few: one per key written nearline) and kept up to date.
        if self._stamps is None:
            tp = self.topic_partition
            with self.owner.lock:
                rows = self.owner.con.execute(f"SELECT key, stamp FROM {RMD} WHERE topic = ?", [tp.topic]).fetchall()
            self._stamps = {bytes(k): bytes(v) for k, v in rows}
        return self._stamps.get(bytes(key))

    def sst_put(self, key: bytes, value: bytes) -> None:
        raise NotImplementedError("DuckDB ingests sorted pushes like any other (sorted_ingest is False)")

    def sst_put_run(self, keys: list[bytes], values: list[bytes]) -> None:
        raise NotImplementedError("DuckDB ingests sorted pushes like any other (sorted_ingest is False)")

    def ingest_sst(self) -> None:
        return None

    def close(self) -> None:
        self._stamps = None

    def destroy(self) -> None:
        self.close()
        with self.owner.lock:
            self.checkpoints.delete(self.topic_partition)


__all__ = [
    "DuckDBCheckpointStore",
    "DuckDBFileBusy",
    "DuckDBPartitionStore",
    "DuckDBRecordTransformer",
    "DuckDBVersionTable",
    "RecordTransformer",
    "SchemaNotStorable",
    "quote",
]
