"""What the streaming job runs on the executors: map each source event (a JSON object) to a store write, check a
whole micro-batch before any of it is written, and write it through the nearline writer with a producer identity
derived from the batch. The executors check and write with the nearline writer's own code
(`venice_core.nearline.writer`), from a target the driver resolved: they never open the metadata store.

An event maps to `put(key, value, timestamp)`:
- key: the event's `key_field`, which must fit the store's key schema;
- value: for a store whose newest value schema is a record, the event's `value_fields` (default: every field but
  the key and the event time) as a record; otherwise the one named value field's value. It must fit one of the
  store's value schemas (with no field the schema lacks);
- timestamp: the event's `event_time_field` (epoch milliseconds, or an ISO-8601 time; UTC when it names no zone),
  else the Kafka record's own timestamp, so a replayed event gets the same write timestamp.

Exactly-once effect: a batch's writer for source partition P has the GUID `deterministic_guid("stream", query id,
batch id, P)`, and writes the range's events in offset order, so a batch replayed after a crash (Spark re-runs it
from its offset log, same offsets) sends the very same messages, segments and sequence numbers, and ingestion
skips those it has as DIV duplicates. Everything that shapes a batch's bytes must therefore be the same in a
replay by a later run: the mapping (in the GUID) and what the transform derives from the checkpoint, never the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, NamedTuple, Protocol

from venice_core.errors import InvalidRecord, StreamInputError
from venice_core.nearline.writer import OnlineWriter, RecordEncoder, WriterTarget, write_timestamp
from venice_core.protocol.div import deterministic_guid


@dataclass(frozen=True)
class EventMapping:
    """How events become writes to one store's real-time topic in one region (`target`, resolved on the driver:
    the topic, the store's schemas)."""

    target: WriterTarget
    key_field: str
    value_fields: tuple[str, ...] = ()
    event_time_field: str | None = None

    @cached_property
    def fingerprint(self) -> str:
        target = self.target
        shape = (self.key_field, self.value_fields, self.event_time_field, target.topic, target.value_schemas)
        return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @cached_property
    def encoder(self) -> RecordEncoder:
        """The nearline writer's own checks (key and value schemas), without producing."""
        return RecordEncoder(self.target)

    @property
    def single_value(self) -> bool:
        """The value is one field's value, not a record of fields (the store's newest value schema is no record)."""
        newest = max(self.target.value_schemas, key=lambda s: s[0])[1]
        return not (isinstance(newest, dict) and newest.get("type") == "record")

    def check(self) -> EventMapping:
        """Refuse a mapping no event can satisfy: a single value needs exactly one value field."""
        if not self.target.value_schemas:
            raise StreamInputError(f"store '{self.target.store}' has no value schema")
        if self.single_value and len(self.value_fields) != 1:
            raise StreamInputError(
                f"the values of store '{self.target.store}' are not records: name the one event field that is the "
                "value (--value-fields F)"
            )
        if self.key_field in self.value_fields or self.event_time_field in self.value_fields:
            raise StreamInputError("the key and event-time fields cannot also be value fields")
        return self


@dataclass(frozen=True)
class Write:
    key: Any
    value: Any
    timestamp: int


def event_time(raw: Any) -> int:
    """An event time as epoch milliseconds: an integer as is, an ISO-8601 string parsed (UTC unless it says)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        millis = raw
    elif isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is neither epoch milliseconds nor an ISO-8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        millis = int(moment.timestamp() * 1000)
    else:
        raise ValueError(f"{raw!r} is neither epoch milliseconds nor an ISO-8601 time")
    if millis < 0:
        raise ValueError(f"{raw!r} is before 1970")
    return millis


def map_event(raw: bytes | None, kafka_timestamp: int, where: str, mapping: EventMapping) -> Write:
    """One event's write; StreamInputError, naming the event (`where`: topic/partition@offset), if it has none."""
    try:
        event = json.loads(raw) if raw is not None else None
    except ValueError:
        event = None
    if not isinstance(event, dict):
        raise StreamInputError(f"event at {where} is not a JSON object")
    key = event.get(mapping.key_field)
    if key is None:
        raise StreamInputError(f"event at {where} has no key field '{mapping.key_field}'")
    if mapping.event_time_field is None:
        timestamp = kafka_timestamp
    else:
        if event.get(mapping.event_time_field) is None:
            raise StreamInputError(f"event at {where} has no event-time field '{mapping.event_time_field}'")
        try:
            timestamp = event_time(event[mapping.event_time_field])
        except ValueError as exc:
            raise StreamInputError(f"event at {where}: event time {exc}") from None
    for name in mapping.value_fields:
        if name not in event:
            raise StreamInputError(f"event at {where} has no value field '{name}'")
    if mapping.single_value:
        value = event[mapping.value_fields[0]]
    else:
        skip = {mapping.key_field, mapping.event_time_field}
        names = mapping.value_fields or tuple(name for name in event if name not in skip)
        value = {name: event[name] for name in names}
    try:  # what the writer checks before it produces, checked here before anything of the batch is
        mapping.encoder.key(key)
        mapping.encoder.value(value)
        write_timestamp(timestamp)
    except InvalidRecord as exc:
        raise StreamInputError(f"event at {where}: {exc}") from None
    return Write(key, value, timestamp)


def _where(row: Any) -> str:
    return f"{row.topic}/{row.partition}@{row.offset}"


@dataclass
class PartitionSummary:
    """One task's share of a batch, after checking it: its events and its first bad one (the offsets a batch
    reached are read from Spark's offset log)."""

    records: int = 0
    error: str | None = None


def check_rows(rows: Iterable[Any], mapping: EventMapping) -> PartitionSummary:
    """Map every event of a task's rows without writing anything; stop at the first bad one."""
    summary = PartitionSummary()
    for row in rows:
        try:
            map_event(row.value, row.timestamp, _where(row), mapping)
        except StreamInputError as exc:
            summary.error = str(exc)
            return summary
        summary.records += 1
    return summary


class NearlineWriter(Protocol):
    """What the job needs of `venice_core.nearline.writer.OnlineWriter`."""

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> object: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


WriterFactory = Callable[[bytes], NearlineWriter]


@dataclass(frozen=True)
class BatchSpec:
    """One micro-batch's write: the mapping (and its target), and the identity its writers derive GUIDs from."""

    query_id: str
    batch_id: int
    mapping: EventMapping
    # Fault injection for the recovery test: one task (the one that creates `hang_marker`) stops after writing and
    # flushing this many records, so the test can kill the job in the middle of a batch.
    hang_after: int = 0
    hang_marker: str | None = None

    def hangs_now(self, written: int) -> bool:
        if not self.hang_after or written != self.hang_after or self.hang_marker is None:
            return False
        try:
            os.close(os.open(self.hang_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def guid(self, source_partition: int) -> bytes:
        """Derived from the batch and from what shapes its bytes (the mapping, the topic, the value schemas): a
        replay under a changed mapping or a newly registered schema is a new producer, not a corrupt segment."""
        return deterministic_guid("stream", self.query_id, self.batch_id, source_partition, self.mapping.fingerprint)


def online_writer(spec: BatchSpec) -> WriterFactory:
    """The production writer factory: the nearline writer to the target's real-time topic, with a given GUID
    (`for_target`: no metadata store on the executors)."""

    def make(guid: bytes) -> NearlineWriter:
        return OnlineWriter.for_target(spec.mapping.target, guid=guid)

    return make


def write_rows(rows: Iterable[Any], spec: BatchSpec, make_writer: WriterFactory | None = None) -> int:
    """Write a task's rows, one writer per source partition, in the rows' (offset) order, then close every writer
    (end its segments, flush). Returns the records written.

    A task that fails part-way ends no segment: what it sent is a prefix of what the task sends when run again
    (the same GUIDs, sequence numbers and bytes), which ingestion takes as duplicates before the new messages. An
    END_OF_SEGMENT sent early would sit where the retry's data belongs."""
    make_writer = make_writer or online_writer(spec)
    writers: dict[int, NearlineWriter] = {}
    written = 0
    try:
        for row in rows:
            write = map_event(row.value, row.timestamp, _where(row), spec.mapping)
            writer = writers.get(row.partition)
            if writer is None:
                writer = writers[row.partition] = make_writer(spec.guid(row.partition))
            writer.put(write.key, write.value, timestamp=write.timestamp)
            written += 1
            if spec.hangs_now(written):
                for open_writer in writers.values():
                    open_writer.flush()
                time.sleep(3600)
    except BaseException:
        for writer in writers.values():
            with contextlib.suppress(Exception):
                writer.flush()
        raise
    for partition in sorted(writers):
        writers[partition].close()
    return written


class SourceRow(NamedTuple):
    """A source record as the tasks see it (the source's columns)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def rows_of(batches: Iterable[Any]) -> Iterator[SourceRow]:
    """The rows of Arrow record batches (what `mapInArrow` hands a task)."""
    for batch in batches:
        columns = batch.to_pydict()
        yield from map(SourceRow, *(columns[name] for name in SourceRow._fields))


CHECK_SCHEMA = "records long, error string"
WRITE_SCHEMA = "records long"


def check_batches(batches: Iterable[Any], mapping: EventMapping) -> Iterator[Any]:
    """`check_rows` as a `mapInArrow` task: one row, its summary."""
    import pyarrow as pa

    summary = check_rows(rows_of(batches), mapping)
    yield pa.RecordBatch.from_pydict(
        {"records": [summary.records], "error": [summary.error]},
        schema=pa.schema([("records", pa.int64()), ("error", pa.string())]),
    )


def write_batches(batches: Iterable[Any], spec: BatchSpec) -> Iterator[Any]:
    """`write_rows` as a `mapInArrow` task: one row, the records written."""
    import pyarrow as pa

    written = write_rows(rows_of(batches), spec)
    yield pa.RecordBatch.from_pydict({"records": [written]}, schema=pa.schema([("records", pa.int64())]))
