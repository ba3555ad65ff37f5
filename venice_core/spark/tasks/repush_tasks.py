"""What the repush job runs on Spark's executors: decode a version topic's messages (map side, with the optional
combiner), then compact each key's records and write the survivors (reduce side, through the push job's
`PartitionWriter`). Imports no SQLAlchemy, like `spark.tasks.push_tasks`.

Map side (`decode_batches`), per offset range: control messages are skipped; every PUT, DELETE, chunk and manifest
becomes a row keyed by the user key (a chunk's key is the user key plus a suffix, stripped here) and tagged with
the new version's partition for it (by the new version's partitioner), its source offset, its kind, schema id and
write timestamp.

Reduce side (`compact_and_write`), rows sorted by (partition, key, offset): per key, the record at the highest
offset wins (a retried writer's duplicates are the same bytes at higher offsets); a winning manifest is assembled
from the latest copy of each chunk it names written before it (a missing chunk, or sizes that disagree with the
manifest, fail the job); then TTL (a record written before the cut-off is dropped; batch-marked records, write
timestamp 0, are kept); a final DELETE is dropped, but kept as a tombstone, with its timestamp, when the new
version is hybrid (active-active: a replayed older nearline write must not resurrect the key); values are
re-compressed when the compression or its dictionary differs; each record is written with its own write timestamp.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import methodcaller
from typing import Any

import numpy as np

from venice_core.errors import PushJobError
from venice_core.protocol import chunking
from venice_core.protocol.compression import compressor, decompressor
from venice_core.protocol.envelope import (
    CHUNK_SCHEMA_ID,
    DATA_PREFIX,
    HEADER,
    KEY_TYPE_DATA,
    MANIFEST_SCHEMA_ID,
    PROTOCOL_VERSION,
    SCHEMA_ID,
    MessageType,
)
from venice_core.protocol.partitioner import VenicePartitioner
from venice_core.protocol.put_run import AFTER_HEADER, PREFIX, prefix_bytes
from venice_core.pubsub.getters import KEY, OFFSET, VALUE
from venice_core.spark.specs.task_specs import RepushTaskSpec, SourceRange
from venice_core.spark.tasks.push_tasks import PartitionWriter, task_writer
from venice_core.storage.ingestion_checkpoint import StartOfPush

PUT, DELETE, MANIFEST, CHUNK = 0, 1, 2, 3
DECODED_SCHEMA = (
    "partition int, key binary, offset long, kind int, schema_id int, timestamp long, value binary, chunk binary"
)
WRITTEN_SCHEMA = "partition int, records long, tombstones long, expired long, deleted long, superseded long"
CHUNK_SUFFIX_BYTES = chunking.CHUNK_SUFFIX.size


class RepushJobError(PushJobError):
    """The source topic cannot be repushed as it is (a chunk missing, a manifest's size wrong, a bad message)."""


def decode_message(kafka_key: bytes, kafka_value: bytes) -> tuple[bytes, int, int, int, bytes, bytes] | None:
    """(user key, kind, schema id, write timestamp, value, chunk key) of a data message; None for a control
    message."""
    if kafka_key[:1] != KEY_TYPE_DATA:
        return None
    if len(kafka_value) < DATA_PREFIX.size:
        raise RepushJobError(f"a message of {len(kafka_value)} bytes is too short to hold an envelope")
    version, mtype, _guid, _segment, _sequence, timestamp, schema_id = DATA_PREFIX.unpack_from(kafka_value)
    if version != PROTOCOL_VERSION or mtype > MessageType.DELETE:
        raise RepushJobError(f"unknown message (protocol version {version}, type {mtype})")
    key = kafka_key[1:]
    if mtype == MessageType.DELETE:
        return key, DELETE, schema_id, timestamp, b"", b""
    value = kafka_value[DATA_PREFIX.size :]
    if schema_id == CHUNK_SCHEMA_ID:
        return key[:-CHUNK_SUFFIX_BYTES], CHUNK, schema_id, timestamp, value, key
    return key, MANIFEST if schema_id == MANIFEST_SCHEMA_ID else PUT, schema_id, timestamp, value, b""


assert DATA_PREFIX.size == HEADER.size + 4


def combine(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The combiner: one offset range's rows of one key (in offset order) pruned to what the reduce side can still
    need: the last PUT, DELETE or manifest (with the chunks it names: each one's latest copy before it), and the
    latest copy of each chunk written after it (a manifest in a later range may name them)."""
    last = max((i for i, row in enumerate(rows) if row[3] != CHUNK), default=-1)
    kept: list[tuple[Any, ...]] = []
    if last >= 0:
        final = rows[last]
        if final[3] == MANIFEST:
            named = set(chunking.Manifest.decode(final[6]).chunk_keys)
            latest = {row[7]: row for row in rows[:last] if row[3] == CHUNK and row[7] in named}
            kept.extend(latest.values())
        kept.append(final)
    after = {row[7]: row for row in rows[last + 1 :]}  # only chunks follow the last other record
    kept.extend(after.values())
    return sorted(kept, key=lambda row: row[2])


def decode_batches(batches: Iterable[Any], spec: RepushTaskSpec) -> Iterator[Any]:
    """mapInArrow over one offset range (rows of the venice_kafka source): decoded data rows, each tagged with the
    new version's partition for its key; combined per key first when the combiner is on."""
    import pyarrow as pa

    partitions, combiner, partition_of = spec.writer.partitions, spec.combiner, spec.writer.partitioner.partition
    names = ["partition", "key", "offset", "kind", "schema_id", "timestamp", "value", "chunk"]
    types = [pa.int32(), pa.binary(), pa.int64(), pa.int32(), pa.int32(), pa.int64(), pa.binary(), pa.binary()]
    by_key: dict[bytes, list[tuple[Any, ...]]] = {}

    def to_batch(rows: list[tuple[Any, ...]]) -> Any:
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
        return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, types, strict=True)], names=names)

    for batch in batches:
        offsets = batch.column("offset").to_pylist()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        out: list[tuple[Any, ...]] = []
        for offset, kafka_key, kafka_value in zip(offsets, keys, values, strict=True):
            decoded = decode_message(kafka_key, kafka_value)
            if decoded is None:
                continue  # control messages: the new version has its own
            key, kind, schema_id, timestamp, value, chunk_key = decoded
            row = (partition_of(key, partitions), key, offset, kind, schema_id, timestamp, value, chunk_key)
            if combiner:
                by_key.setdefault(key, []).append(row)
            else:
                out.append(row)
        if out:
            yield to_batch(out)
    if combiner:
        combined = [row for rows in by_key.values() for row in combine(rows)]
        for start in range(0, len(combined), 10_000):
            yield to_batch(combined[start : start + 10_000])


class Compactor:
    """The reduce side of one key at a time: fed its rows in offset order, it says what the new version holds."""

    def __init__(self, spec: RepushTaskSpec) -> None:
        self.ttl_start = spec.ttl_start_ms
        self.keep_tombstones = spec.keep_tombstones
        source = (spec.source_compression, spec.source_dictionary)
        target = (spec.target_compression, spec.target_dictionary)
        self.recompress: Callable[[bytes], bytes] | None = None
        if source != target:  # another strategy, or another dictionary (a ZSTD_WITH_DICT repush trains a new one)
            decompress, compress = decompressor(*source), compressor(*target)
            self.recompress = lambda value: compress(decompress(value))
        self.stats = {"tombstones": 0, "expired": 0, "deleted": 0, "superseded": 0}

    def before_ttl(self, timestamp: int) -> bool:
        """Written before the TTL's cut-off; batch-marked records (timestamp 0) never are."""
        return self.ttl_start is not None and 0 < timestamp < self.ttl_start

    def expired(self, timestamp: int) -> bool:
        """`before_ttl`, counted."""
        if self.before_ttl(timestamp):
            self.stats["expired"] += 1
            return True
        return False

    def resolve(self, rows: list[tuple[Any, ...]]) -> tuple[bytes | None, int, int] | None:
        """(value or None for a tombstone, schema id, write timestamp) the key is written with, or None."""
        chunks: dict[bytes, bytes] = {}
        final: tuple[Any, ...] | None = None
        parts: list[bytes | None] = []
        manifest: chunking.Manifest | None = None
        for row in rows:
            kind = row[3]
            if kind == CHUNK:
                chunks[row[7]] = row[6]
                continue
            if final is not None:
                self.stats["superseded"] += 1
            final = row
            if kind == MANIFEST:
                manifest = chunking.Manifest.decode(row[6])
                parts = [chunks.get(k) for k in manifest.chunk_keys]
        if final is None:
            return None  # chunks of a value whose manifest was never written (a writer that died mid-value)
        key, kind, schema_id, timestamp = final[1], final[3], final[4], final[5]
        if self.expired(timestamp):
            return None
        if kind == DELETE:
            if not self.keep_tombstones:
                self.stats["deleted"] += 1
                return None
            self.stats["tombstones"] += 1
            return None, schema_id, timestamp
        value = final[6]
        if kind == MANIFEST:
            assert manifest is not None
            missing = [i for i, part in enumerate(parts) if part is None]
            if missing:
                raise RepushJobError(
                    f"chunk {missing[0]} of {len(parts)} of the value of key {key[:32].hex()} (offset {final[2]}) is "
                    "missing from the source topic"
                )
            value = b"".join(parts)  # type: ignore[arg-type]  # no part is None: `missing` above is empty
            if len(value) != manifest.total_size:
                raise RepushJobError(
                    f"the chunks of the value of key {key[:32].hex()} (offset {final[2]}) hold {len(value)} bytes, "
                    f"its manifest says {manifest.total_size}"
                )
            schema_id = manifest.schema_id
        if self.recompress is not None:
            value = self.recompress(value)
        return value, schema_id, timestamp


def grouped(batches: Iterable[Any]) -> Iterator[list[tuple[Any, ...]]]:
    """Rows sorted by (partition, key, offset), grouped by key (a key's rows may span Arrow batches)."""
    group: list[tuple[Any, ...]] = []
    for batch in batches:
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        for row in zip(*columns, strict=True):
            if group and (row[1] != group[0][1] or row[0] != group[0][0]):
                yield group
                group = []
            group.append(row)
    if group:
        yield group


def compact_and_write(batches: Iterable[Any], spec: RepushTaskSpec) -> Iterator[Any]:
    """mapInArrow on the sorted rows of whole Kafka partitions: compact each key, write the survivors through the
    push job's writer; yield per-partition counts (PUTs, as END_OF_PUSH carries them) and what was left out."""
    compactor = Compactor(spec)
    writer = task_writer(spec.writer)
    for rows in grouped(batches):
        _write_key(compactor, writer, rows)
    writer.finish()
    yield _written(writer, compactor)


def repush_partitions(batches: Iterable[Any], spec: RepushTaskSpec) -> Iterator[Any]:
    """The map-only repush (mapInArrow over `spark.range`: each row an index into `spec.ranges`), for a source
    with the new version's partition count and partitioner (each key stays in its partition) and no
    partition over `max.records.per.mapper`: each task reads its partitions one after the other, in offset order from
    their ranges (fixed on the driver, so a retried task reads the same records), and writes them compacted
    (`_repush_partition`). No shuffle, and the records never pass through the JVM."""
    compactor = Compactor(spec)
    writer = task_writer(spec.writer)
    for index in (index for batch in batches for index in batch.column(0).to_pylist()):
        _repush_partition(spec, spec.ranges[index], compactor, writer)
    writer.finish()
    yield _written(writer, compactor)


def _repush_partition(spec: RepushTaskSpec, source: SourceRange, compactor: Compactor, writer: PartitionWriter) -> None:
    """One source partition, copied while it is read for as long as it is plain (`SourceRecords`: PUTs only, keys
    strictly increasing, as a push or an earlier repush wrote it), `COPY_UNIT` records at a time, so the new version's
    regions ingest while the task reads. A partition that is not plain is read whole, grouped by key in memory and
    compacted: written sorted if nothing of it was copied (`_compact_partition`); otherwise `_amend_partition` writes
    only what the copy got wrong.

    What is copied depends on the source alone, never on how its records came in consumed batches: whole units of
    the partition's plain prefix (the records before the first that is not plain), or all of a plain partition. A
    retried task (or a re-run job, under the same producer GUIDs) so sends the same messages in the same order, which
    DIV needs to drop its copies of what an earlier attempt sent."""
    partition, before = source.partition, dict(compactor.stats)
    records, written = SourceRecords(), 0
    for kafka_keys, values, offsets in _data_batches(spec, partition, source.start, source.end):
        records.take(kafka_keys, values, offsets)
        whole_units = records.plain_count - records.plain_count % COPY_UNIT
        if whole_units > records.copied:
            written += _copy_plain(*records.uncopied(whole_units), partition, spec, compactor, writer)
    if records.plain:
        written += _copy_plain(*records.uncopied(records.plain_count), partition, spec, compactor, writer)
        return
    compactor.stats.update(before)  # what the copy left out is counted again, with the rest
    if written:
        _amend_partition(records, partition, spec, compactor, writer)
    else:
        _compact_partition(records, partition, spec, compactor, writer)


# A partition's plain prefix is copied this many records at a time (and the rest of a plain partition at its end).
COPY_UNIT = 10_000


@dataclass
class SourceRecords:
    """One source partition's data messages in offset order (control messages left out: the new version has its
    own), and how many of the first are plain: well-formed PUTs of user schemas (no chunk, manifest or DELETE) whose
    keys strictly increase, so no key appears twice. The partition is plain while every record so far is. The plain
    records' write timestamps are read with the check; `copied` counts the records handed out to be copied."""

    kafka_keys: list[bytes] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    plain: bool = True
    plain_count: int = 0
    stamps: list[np.ndarray] = field(default_factory=list)  # of the plain records not yet handed out
    copied: int = 0

    def take(self, kafka_keys: list[bytes], values: list[bytes], offsets: list[int]) -> None:
        """One consumed batch's data messages: checked with a few numpy steps over their headers and one C-level
        pass over their keys, not a Python step a record (but in the one batch where the partition stops being
        plain, where the first record that is not is looked for)."""
        if self.plain:
            plain, stamps = _plain_prefix(self.kafka_keys[-1:], kafka_keys, values)
            self.plain = plain == len(kafka_keys)
            self.plain_count += plain
            self.stamps.append(stamps)
        self.kafka_keys += kafka_keys
        self.values += values
        self.offsets += offsets

    def uncopied(self, end: int) -> tuple[list[bytes], list[bytes], np.ndarray]:
        """The plain records from `copied` to `end` (Kafka keys, values, write timestamps), now counted as copied."""
        assert self.copied <= end <= self.plain_count
        start, self.copied = self.copied, end
        stamps = np.concatenate(self.stamps) if self.stamps else np.empty(0, np.int64)
        self.stamps = [stamps[end - start :]]
        return self.kafka_keys[start:end], self.values[start:end], stamps[: end - start]


def _plain_prefix(previous: list[bytes], kafka_keys: list[bytes], values: list[bytes]) -> tuple[int, np.ndarray]:
    """How many of a batch's first records are plain, following `previous` (the last key before them, if any),
    and their write timestamps."""
    heads = prefix_bytes(values)
    if heads is not None:
        prefix = heads.view(PREFIX).reshape(-1)
        well_formed = (
            (prefix["version"] == PROTOCOL_VERSION) & (prefix["type"] == MessageType.PUT) & (prefix["schema_id"] > 0)
        )
        ordered = all(map(operator.lt, chain(previous, kafka_keys), kafka_keys if previous else kafka_keys[1:]))
        if ordered and well_formed.all():
            return len(kafka_keys), prefix["timestamp"].astype(np.int64)
    plain = 0  # the batch where plainness ends: its first record that is not plain, looked for one by one
    last = previous[0] if previous else None
    for kafka_key, value in zip(kafka_keys, values, strict=True):
        if len(value) < DATA_PREFIX.size or (last is not None and not last < kafka_key):
            break
        version, mtype, *_, schema_id = DATA_PREFIX.unpack_from(value)
        if version != PROTOCOL_VERSION or mtype != MessageType.PUT or schema_id <= 0:
            break
        plain, last = plain + 1, kafka_key
    heads = prefix_bytes(values[:plain])
    stamps = (
        heads.view(PREFIX).reshape(-1)["timestamp"].astype(np.int64) if heads is not None else np.empty(0, np.int64)
    )
    return plain, stamps


def _data_batches(
    spec: RepushTaskSpec, partition: int, start: int, end: int
) -> Iterator[tuple[list[bytes], list[bytes], list[int]]]:
    """One source partition's offset range, a consumed batch at a time: its data messages' Kafka keys, values and
    offsets (a segment's control messages, a few a partition, left out)."""
    from venice_core.spark.tasks.kafka_source import read_range_messages

    for batch in read_range_messages(spec.source_bootstrap, spec.source_topic, partition, start, end, catch_up=True):
        kafka_keys = list(map(KEY, batch))
        if not all(map(_IS_DATA_KEY, kafka_keys)):
            batch = list(compress(batch, map(_IS_DATA_KEY, kafka_keys)))
            kafka_keys = list(filter(_IS_DATA_KEY, kafka_keys))
        if batch:
            yield kafka_keys, list(map(VALUE, batch)), list(map(OFFSET, batch))


# Whether a Kafka key is a data message's, as a C-level callable (`map` of it runs no Python bytecode).
_IS_DATA_KEY = methodcaller("startswith", KEY_TYPE_DATA)


# Every this many keys of a plain partition's copied batch (and each batch's last) is checked against the
# partitioner: a source written by another partitioner (or with another partition count) puts most keys elsewhere,
# so a sample catches it; MD5 of every key would cost more than the copy itself. The compaction path, which reads
# every key anyway, checks each.
PARTITION_CHECK_EVERY = 256


def _copy_plain(
    kafka_keys: list[bytes],
    values: list[bytes],
    stamps: np.ndarray,
    partition: int,
    spec: RepushTaskSpec,
    compactor: Compactor,
    writer: PartitionWriter,
) -> int:
    """Write plain records in their order (already the keys' byte order), each as it is stored, with its write
    timestamp; TTL and re-compression as `Compactor.resolve` applies them. A sample of the keys, the first and the
    last among them, is checked against the partitioner first (`PARTITION_CHECK_EVERY`): a source not written by
    this partitioner would hold records no read finds. How many records were written."""
    if not kafka_keys:
        return 0
    partitions, partitioner = spec.writer.partitions, spec.writer.partitioner
    for at in [*range(0, len(kafka_keys) - 1, PARTITION_CHECK_EVERY), len(kafka_keys) - 1]:
        _check_partition(kafka_keys[at][1:], partition, partitions, spec.source_topic, partitioner)
    if compactor.ttl_start is not None:
        expired = (stamps > 0) & (stamps < compactor.ttl_start)  # batch-marked records (0) never are
        compactor.stats["expired"] += int(expired.sum())
        if expired.any():
            kept = (~expired).tolist()
            kafka_keys, values = list(compress(kafka_keys, kept)), list(compress(values, kept))
            stamps = stamps[~expired]
        if not kafka_keys:
            return 0
    recompress = compactor.recompress
    if recompress is None:
        writer.write_stored_run(partition, kafka_keys, list(map(AFTER_HEADER, values)), stamps)
        return len(kafka_keys)
    header_size, prefix_size = HEADER.size, DATA_PREFIX.size
    for kafka_key, kafka_value, stamp in zip(kafka_keys, values, stamps.tolist(), strict=True):
        (schema_id,) = SCHEMA_ID.unpack_from(kafka_value, header_size)
        writer.write_record(partition, kafka_key[1:], recompress(kafka_value[prefix_size:]), schema_id, stamp)
    return len(kafka_keys)


def _by_key(records: SourceRecords, partition: int) -> dict[bytes, list[tuple[Any, ...]]]:
    """A partition's records decoded and grouped by key, each key's in offset order. `records` is emptied as they
    are grouped, so the partition is held in memory once, not twice."""
    by_key: dict[bytes, list[tuple[Any, ...]]] = {}
    kafka_keys, values, offsets = records.kafka_keys, records.values, records.offsets
    for source in (kafka_keys, values, offsets):
        source.reverse()
    while kafka_keys:  # in offset order
        kafka_key, kafka_value, offset = kafka_keys.pop(), values.pop(), offsets.pop()
        decoded = decode_message(kafka_key, kafka_value)
        assert decoded is not None  # control messages were left out when read
        key, kind, schema_id, timestamp, value, chunk_key = decoded
        by_key.setdefault(key, []).append((partition, key, offset, kind, schema_id, timestamp, value, chunk_key))
    return by_key


def _compact_partition(
    records: SourceRecords,
    partition: int,
    spec: RepushTaskSpec,
    compactor: Compactor,
    writer: PartitionWriter,
) -> None:
    """Group a partition's records by key, then write each key's survivor in key byte order."""
    by_key = _by_key(records, partition)
    for key in sorted(by_key):  # bytes compare unsigned, as Spark's sort and RocksDB do
        _check_partition(key, partition, spec.writer.partitions, spec.source_topic, spec.writer.partitioner)
        _write_key(compactor, writer, by_key.pop(key))


def _amend_partition(
    records: SourceRecords,
    partition: int,
    spec: RepushTaskSpec,
    compactor: Compactor,
    writer: PartitionWriter,
) -> None:
    """A partition found not plain after its first `records.copied` records were copied (sorted): each key whose
    survivor is not what the copy wrote gets the survivor written over it, or a DELETE where nothing survives, after
    START_OF_PUSH again in the partition saying the rest comes unsorted (ingestion ingests the SST file it holds
    and takes plain writes from there on). What the new version holds is what `_compact_partition` would have
    written; END_OF_PUSH's count is of PUTs sent, as ingestion counts them (a key written twice counts twice).

    One difference remains on a hybrid version (which keeps write timestamps): a copied key with a write timestamp
    whose survivor is written with timestamp 0 (a batch-marked record), or not at all (expired by TTL), keeps the
    copy's timestamp, so a nearline write older than it is refused where a compacted partition would take it."""
    last_copied = records.offsets[records.copied - 1]
    by_key = _by_key(records, partition)
    unsorted_said = False
    for key in sorted(by_key):
        _check_partition(key, partition, spec.writer.partitions, spec.source_topic, spec.writer.partitioner)
        rows = by_key.pop(key)
        first = rows[0]  # a copied key's first record is the PUT the copy read (and wrote, unless expired)
        was_written = first[2] <= last_copied and not compactor.before_ttl(first[5])  # as `_copy_plain` left out
        final = next(row for row in reversed(rows) if row[3] != CHUNK) if was_written else None
        if final is first:
            continue  # the copy's record survives (chunks alone, of a value never finished, do not count)
        resolved = compactor.resolve(rows)  # counted as the compaction counts it
        if final is not None and final[3:7] == first[3:7]:
            continue  # a retried writer's copy of the record the copy wrote: the same bytes and write timestamp
        if resolved is None and not was_written:
            continue
        if not unsorted_said:
            body = StartOfPush(sorted=False, chunked=True, compression=spec.target_compression).to_json()
            writer.start_of_push(partition, body)
            unsorted_said = True
        if resolved is not None:
            value, schema_id, timestamp = resolved
            writer.write_record(partition, key, value, schema_id, timestamp)
        else:
            writer.write_record(partition, key, None, first[4], 0)


def _check_partition(key: bytes, partition: int, partitions: int, topic: str, partitioner: VenicePartitioner) -> None:
    """One writer per partition, or DIV breaks: a key must belong to the partition it was read from."""
    belongs = partitioner.partition(key, partitions)
    if belongs != partition:
        raise RepushJobError(
            f"key {key[:32].hex()} of {topic}/{partition} belongs to partition "
            f"{belongs}: the source was not written by this partitioner"
        )


def _write_key(compactor: Compactor, writer: Any, rows: list[tuple[Any, ...]]) -> None:
    resolved = compactor.resolve(rows)
    if resolved is not None:
        value, schema_id, timestamp = resolved
        writer.write_record(rows[0][0], rows[0][1], value, schema_id, timestamp)


def _written(writer: Any, compactor: Compactor) -> Any:
    """One task's WRITTEN_SCHEMA rows: per partition it wrote, its PUTs; the task's stats on the first row only."""
    import pyarrow as pa

    partitions = list(writer.counts) or [-1]  # -1: a task that wrote nothing still reports what it left out
    stats = compactor.stats
    counts = [writer.counts.get(p, 0) for p in partitions]
    arrays = [pa.array(partitions, pa.int32()), pa.array(counts, pa.int64())]
    arrays += [pa.array([stats[name] if i == 0 else 0 for i in range(len(partitions))], pa.int64()) for name in stats]
    return pa.RecordBatch.from_arrays(arrays, names=["partition", "records", *stats])
