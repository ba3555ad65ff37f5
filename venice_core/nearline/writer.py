"""Nearline writes: a hybrid store's records, produced to one region's real-time topic through the protocol.

`OnlineWriter(store, region).put(key, value, timestamp=None)`, `.delete(key, timestamp=None)`, `.flush()`,
`.close()`. Everything is checked before anything is produced: the store exists and is hybrid, the region is
configured, its real-time topic exists, the key fits the key schema, the value fits a value schema (the newest it
fits is the one written; a record with a field no schema has fits none), the timestamp is a positive number of
milliseconds. A write's timestamp is the logical time the caller gives, else now; deletes carry the newest value
schema's id. Values go to the real-time topic uncompressed, as in Venice: the store's compression is the
version's business, applied by whoever writes a version topic.

The protocol is `pubsub.writer.VersionTopicWriter`'s, on the real-time topic: one producer GUID per writer, a DIV
segment per partition, started on the partition's first write and ended (END_OF_SEGMENT with its checksum) by
`close`; values past the chunk size are chunked. Keys are partitioned by the store's partitioner, which a hybrid store
keeps (`controller.stores`): the partitioner of every version that ingests the real-time topic, whose partition p
version partition p reads. Given the same GUID and the same calls with the same
timestamps, a writer sends byte-identical messages (segments numbered from 0, control messages stamped with the
timestamps of the records around them, not the clock), so a replay under a deterministic GUID
(`protocol.div.deterministic_guid`) is skipped by ingestion as duplicates.

A writer is not thread-safe. `resolve_target` reads what a writer needs from the config and the metadata store
once; `OnlineWriter.for_target` starts a writer from it without the metadata store (Spark executors), and
`RecordEncoder` checks and serialises records without producing (to check a whole batch before any of it is
written). This module imports the controller only inside `resolve_target`, so executors need no SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from fastavro.schema import SchemaParseException
from fastavro.validation import ValidationError, validate

from venice_core.config import ClusterConfig, load_config
from venice_core.errors import ComponentError, ConfigError, InvalidRecord, NotHybridStore, VeniceError
from venice_core.protocol import serde
from venice_core.protocol.envelope import now_ms
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner
from venice_core.protocol.partitioner_config import load_partitioner
from venice_core.pubsub import admin
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.security import principals

if TYPE_CHECKING:  # SQLAlchemy only where the metadata store is read (`resolve_target`): not on executors
    from venice_core.meta import MetadataStore

MAX_TIMESTAMP_MS = 2**63 - 1  # the envelope's timestamp is a signed 64-bit integer


@dataclass(frozen=True)
class WriterTarget:
    """What a writer needs to know of its store and region (picklable: resolved once, sent to executors)."""

    store: str
    region: str
    bootstrap: str
    topic: str
    partition_count: int
    key_schema: Any  # the decoded JSON of the Avro schema
    value_schemas: tuple[tuple[int, Any], ...]  # (schema id, decoded JSON), by id
    partitioner: VenicePartitioner = DEFAULT_PARTITIONER  # the store's (that of the versions reading the topic)
    identity: str | None = None  # the store's nearline principal's Kafka credentials file, with security


def resolve_target(
    store: str, region: str | None = None, *, config: ClusterConfig | None = None, meta: MetadataStore | None = None
) -> WriterTarget:
    """The store's real-time topic in the region (default: the source region) and its schemas. ConfigError for
    an unknown region, StoreNotFound, NotHybridStore for a batch-only store."""
    from venice_core.controller.stores import get_store, value_schemas
    from venice_core.meta import MetadataStore

    config = config or load_config()
    region_config = config.region(region or config.source_region)
    own_meta = meta is None
    meta = meta or MetadataStore(config.metadata_db_url)
    try:
        if own_meta:
            meta.check_migrated()
        with meta.session() as session:
            row = get_store(session, store)
            if row.hybrid is None:
                raise NotHybridStore(store)
            key_schema = json.loads(row.key_schema)
            return WriterTarget(
                store,
                region_config.name,
                region_config.kafka_bootstrap,
                region_config.real_time_topic(store),
                row.partition_count,
                key_schema,
                tuple((s.schema_id, json.loads(s.schema)) for s in value_schemas(session, store)),
                load_partitioner(row.partitioner, key_schema, config.partitioner_classes, f"store '{store}'"),
                str(principals.client_file(config, principals.nearline(store))) if config.security.enabled else None,
            )
    finally:
        if own_meta:
            meta.dispose()


def write_timestamp(timestamp: object | None) -> int:
    """A write's timestamp in ms: the given one (a positive integer; 0 is batch data's marker), else now."""
    if timestamp is None:
        return now_ms()
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 < timestamp <= MAX_TIMESTAMP_MS:
        raise InvalidRecord(
            f"a write timestamp must be a whole number of milliseconds from 1 to {MAX_TIMESTAMP_MS} "
            f"(0 marks batch data), got {timestamp!r}"
        )
    return timestamp


class RecordEncoder:
    """A store's keys and values checked against its schemas and serialised (fastavro, as the client reads)."""

    def __init__(self, target: WriterTarget) -> None:
        if not target.value_schemas:
            raise VeniceError(f"store '{target.store}' has no value schema")
        self.store = target.store
        self._key_schema = serde.parse(target.key_schema)
        # Newest first: a value is written with the newest schema it fits.
        self._value_schemas = [(i, serde.parse(s)) for i, s in sorted(target.value_schemas, reverse=True)]
        self.delete_schema_id = self._value_schemas[0][0]

    def key(self, key: Any) -> bytes:
        reason = _misfit(key, self._key_schema)
        if reason is None:
            try:
                return serde.serialize(self._key_schema, key)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                reason = str(exc)
        raise InvalidRecord(f"key {_short(key)} does not match the key schema of '{self.store}': {reason}")

    def value(self, value: Any) -> tuple[int, bytes]:
        """The id of the newest value schema the value fits, and the value serialised with it."""
        first_reason = None
        for schema_id, schema in self._value_schemas:
            reason = _misfit(value, schema)
            if reason is None:
                try:
                    return schema_id, serde.serialize(schema, value)
                except (ValueError, TypeError, AttributeError, KeyError) as exc:
                    reason = str(exc)
            if first_reason is None:
                first_reason = f"{reason} (value schema {schema_id})"
        raise InvalidRecord(f"value {_short(value)} fits no value schema of '{self.store}': {first_reason}")


class OnlineWriter:
    """Nearline writes to one region's real-time topic of a hybrid store (see the module's docstring)."""

    def __init__(
        self,
        store: str,
        region: str | None = None,
        *,
        config: ClusterConfig | None = None,
        meta: MetadataStore | None = None,
        guid: bytes | None = None,
        producer_config: dict[str, Any] | None = None,
    ) -> None:
        self._start(resolve_target(store, region, config=config, meta=meta), guid, producer_config)

    @classmethod
    def for_target(
        cls, target: WriterTarget, *, guid: bytes | None = None, producer_config: dict[str, Any] | None = None
    ) -> OnlineWriter:
        """A writer for a resolved target, without reading the metadata store."""
        writer = cls.__new__(cls)
        writer._start(target, guid, producer_config)
        return writer

    def _start(self, target: WriterTarget, guid: bytes | None, producer_config: dict[str, Any] | None) -> None:
        if guid is not None and (not isinstance(guid, bytes) or len(guid) != 16):
            raise VeniceError(f"a producer GUID is 16 bytes, got {guid!r}")
        self.target = target
        self.encoder = RecordEncoder(target)
        self.guid = guid or uuid.uuid4().bytes
        existing = admin.partition_count(target.bootstrap, target.topic)
        if existing is None:
            raise ComponentError(
                f"the real-time topic {target.topic} of '{target.store}' does not exist in {target.region}"
            )
        if existing != target.partition_count:
            raise ComponentError(
                f"the real-time topic {target.topic} has {existing} partitions, store '{target.store}' "
                f"{target.partition_count}"
            )
        self._writer = VersionTopicWriter(
            target.bootstrap,
            target.topic,
            target.partition_count,
            self.guid,
            producer_config=producer_config,
            identity=Path(target.identity) if target.identity else None,
        )
        self._last_timestamp: dict[int, int] = {}  # the partitions with an open segment: their last write's time
        self._closed = False

    def _partition(self, key_bytes: bytes, timestamp: int) -> int:
        if self._closed:
            raise VeniceError(f"the writer to {self.target.topic} is closed")
        count = self.target.partition_count
        partition = self.target.partitioner.partition(key_bytes, count)
        if not 0 <= partition < count:
            raise ConfigError(f"the partitioner of '{self.target.store}' gave partition {partition} of {count}")
        if partition not in self._last_timestamp:
            self._writer.start_segment(partition, timestamp)
        self._last_timestamp[partition] = timestamp
        return partition

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> int:
        """Write a value for a key; returns the write timestamp. InvalidRecord, with nothing produced, for a key
        or value that does not fit or a bad timestamp."""
        key_bytes = self.encoder.key(key)
        schema_id, value_bytes = self.encoder.value(value)
        stamp = write_timestamp(timestamp)
        partition = self._partition(key_bytes, stamp)
        self._writer.put(key_bytes, value_bytes, schema_id, partition, stamp)
        return stamp

    def delete(self, key: Any, timestamp: int | None = None) -> int:
        """Delete a key (a tombstone with its timestamp once ingested); returns the write timestamp."""
        key_bytes = self.encoder.key(key)
        stamp = write_timestamp(timestamp)
        partition = self._partition(key_bytes, stamp)
        self._writer.delete(key_bytes, self.encoder.delete_schema_id, partition, stamp)
        return stamp

    def flush(self, timeout: float = 120.0) -> None:
        """Wait until everything written is acknowledged; ComponentError if anything was not."""
        self._writer.flush(timeout)

    def close(self, timeout: float = 120.0) -> None:
        """End each open segment (END_OF_SEGMENT, stamped with the partition's last write), then flush. Closing
        again does nothing."""
        if self._closed:
            return
        self._closed = True
        for partition in sorted(self._last_timestamp):
            self._writer.end_segment(partition, final=True, timestamp_ms=self._last_timestamp[partition])
        self._writer.flush(timeout)

    def __enter__(self) -> OnlineWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
            return
        # What was written before the failure is still delivered, in ended segments; the body's error is the one
        # to report.
        with contextlib.suppress(VeniceError):
            self.close()


def _misfit(datum: Any, schema: Any) -> str | None:
    """Why the datum does not fit the (parsed) schema, naming the field where one is to blame; None if it fits."""
    try:
        validate(datum, schema, raise_errors=True)
    except ValidationError as exc:
        return "; ".join(_error_text(e) for e in exc.errors[:3])
    named = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
    unknown = _unknown_field(datum, schema, named, "")
    return None if unknown is None else f"{unknown} is not a field of the schema"


def _error_text(error: Any) -> str:
    if not error.field:
        return f"it is not {_type_name(error.schema)}"
    what = "missing (or null)" if error.datum is None else _short(error.datum)
    return f"field {error.field} is {what}, not {_type_name(error.schema)}"


def _type_name(schema: Any) -> str:
    if isinstance(schema, list):
        return " or ".join(_type_name(s) for s in schema)
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return str(schema)


def _short(datum: Any, limit: int = 80) -> str:
    text = repr(datum)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fits_branch(datum: Any, branch: Any) -> bool:
    try:
        return bool(validate(datum, branch, raise_errors=False))
    except (ValueError, SchemaParseException):  # a branch naming a type defined elsewhere in the schema
        return False


def _unknown_field(datum: Any, schema: Any, named: Mapping[str, Any], path: str) -> str | None:
    """The first field of a record in the datum that its schema does not have (fastavro's validation ignores
    them and serialisation drops them: a misspelt field would be lost without a word)."""
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):  # a union: fine if some branch the datum fits has every field it has
        found = None
        for branch in schema:
            if _fits_branch(datum, named.get(branch, branch) if isinstance(branch, str) else branch):
                found = _unknown_field(datum, branch, named, path)
                if found is None:
                    return None
        return found
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "record" and isinstance(datum, Mapping):
        here = path or str(schema.get("name", ""))
        fields = {f["name"]: f["type"] for f in schema["fields"]}
        for name, value in datum.items():
            if name not in fields:
                return f"{here}.{name}"
            found = _unknown_field(value, fields[name], named, f"{here}.{name}")
            if found is not None:
                return found
    elif kind == "array" and isinstance(datum, list | tuple):
        for index, item in enumerate(datum):
            found = _unknown_field(item, schema["items"], named, f"{path}[{index}]")
            if found is not None:
                return found
    elif kind == "map" and isinstance(datum, Mapping):
        for name, value in datum.items():
            found = _unknown_field(value, schema["values"], named, f"{path}[{name!r}]")
            if found is not None:
                return found
    return None
