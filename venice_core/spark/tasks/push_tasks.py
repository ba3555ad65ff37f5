"""What the push job runs on Spark's executors: serialise input rows, and write sorted partitions through the
protocol writer. Kept apart from `spark.jobs.push` so that each Python worker imports only this and what it needs (not
the metadata store and SQLAlchemy: 1.5 s per worker)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from venice_core.errors import PushJobError
from venice_core.protocol import serde
from venice_core.protocol.compression import compressor
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import SCHEMA_ID, ControlMessageType
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.spark.specs.task_specs import PushTaskSpec, WriterSpec
from venice_core.spark.tasks.hash_partitioning import spread_values

if TYPE_CHECKING:
    import numpy as np
    from pyspark.sql import DataFrame, Row


def serialize_batches(batches: Any, spec: PushTaskSpec) -> Any:
    """mapInArrow on the executors: input rows -> (kafka partition, key bytes, value bytes)."""
    import pyarrow as pa

    serialize_key, value_schema = serde.serializer(serde.parse(spec.key_schema)), serde.parse(spec.value_schema)
    key_field, value_field, partitions = spec.key_field, spec.value_field, spec.writer.partitions
    partition_of = spec.writer.partitioner.partition
    for batch in batches:
        out_partitions, out_keys, out_values = [], [], []
        for row in batch.to_pylist():
            key = row.pop(key_field)
            value = row[value_field] if spec.single_value else row
            try:
                key_bytes = serialize_key(key)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PushJobError(f"key {key!r} does not match the key schema: {exc}") from None
            try:
                value_bytes = serde.serialize(value_schema, value)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PushJobError(
                    f"value of key {key!r} does not match value schema {spec.schema_id}: {exc}"
                ) from None
            out_partitions.append(partition_of(key_bytes, partitions))
            out_keys.append(key_bytes)
            out_values.append(value_bytes)
        if out_partitions and not 0 <= min(out_partitions) <= max(out_partitions) < partitions:
            wrong = next(p for p in out_partitions if not 0 <= p < partitions)
            raise PushJobError(f"the version's partitioner gave partition {wrong} of {partitions}")
        yield pa.RecordBatch.from_arrays(
            [pa.array(out_partitions, pa.int32()), pa.array(out_keys, pa.binary()), pa.array(out_values, pa.binary())],
            names=["partition", "key", "value"],
        )


# A repush copies a partition's records this many at a time: each run's messages and checksummed bytes are copies.
STORED_RUN_RECORDS = 50_000


class PartitionWriter:
    """Writes the Kafka partitions one Spark task holds (each whole, sorted by key bytes then value bytes).

    The push job writes PUTs of one value schema, compressed here with the version's compression (`write`); the
    repush job writes records it has already compacted and compressed, each with its own schema id and write
    timestamp, deletes included (`write_record`). The counts END_OF_PUSH carries are of PUTs, as ingestion counts."""

    def __init__(self, spec: WriterSpec, first_attempt: bool) -> None:
        self.spec = spec
        self.first_attempt = first_attempt
        self.compress = compressor(spec.compression, spec.dictionary)
        self.counts: dict[int, int] = {}
        self.partition: int | None = None
        self.writer: VersionTopicWriter | None = None
        self.previous: tuple[bytes, bytes] | None = None

    def _writer_for(self, partition: int) -> VersionTopicWriter:
        """The partition's writer: a new one, its segment started, when the task moves on to another partition."""
        if self.writer is not None and partition == self.partition:
            return self.writer
        self.finish()
        spec = self.spec
        # A GUID per Kafka partition derived from the push job id: a retried task writes as the same producer.
        guid = deterministic_guid(spec.push_job_id, spec.version, partition)
        self.writer = VersionTopicWriter(
            spec.bootstrap, spec.topic, spec.partitions, guid, producer_config=dict(spec.producer_config)
        )
        self.writer.start_segment(partition)
        self.partition, self.previous = partition, None
        self.counts[partition] = 0
        return self.writer

    def write(self, partition: int, key: bytes, value: bytes, schema_id: int, allow_duplicate_key: bool) -> None:
        """A pushed record: the value serialised, not yet compressed; a duplicate key is refused unless allowed."""
        writer = self._writer_for(partition)
        if self.previous is not None and self.previous[0] == key:
            if self.previous[1] == value or allow_duplicate_key:
                return
            raise PushJobError(
                f"duplicate key with different values in the input (key bytes {key[:32].hex()}); "
                "set allow.duplicate.key=true to keep one of them"
            )
        writer.put(key, self.compress(value), schema_id, partition=partition)
        self.previous = (key, value)
        self._written(partition)

    def write_batch(self, batch: Any, schema_id: int, allow_duplicate_key: bool) -> None:
        """An Arrow batch of pushed records (partition, key, value: sorted as `write_sorted` sorts them), a run of
        each partition at a time through `VersionTopicWriter.put_run`. A run with a repeated key, a value to chunk
        or the retry test's fault goes record by record (`write`), whose checks and counts are the reference."""
        import numpy as np
        import pyarrow.compute as pc

        partitions = batch.column(0).to_numpy()
        starts = [0, *(np.flatnonzero(partitions[1:] != partitions[:-1]) + 1).tolist(), len(partitions)]
        for start, end in zip(starts, starts[1:], strict=False):
            partition = int(partitions[start])
            key_column, value_column = (batch.column(i).slice(start, end - start) for i in (1, 2))
            keys, values = key_column.to_pylist(), value_column.to_pylist()
            writer = self._writer_for(partition)
            repeated = (self.previous is not None and self.previous[0] == keys[0]) or (
                len(keys) > 1 and pc.any(pc.equal(key_column[1:], key_column[:-1])).as_py()
            )
            if not repeated and partition != self.spec.fail_partition:
                stored = values if self.compress is bytes else [self.compress(value) for value in values]
                largest = pc.max(pc.binary_length(value_column)).as_py() if stored is values else max(map(len, stored))
                if largest <= writer.max_chunk_bytes:
                    writer.put_run(partition, keys, stored, schema_id)
                    self.previous = (keys[-1], values[-1])
                    self.counts[partition] += len(keys)
                    continue
            for key, value in zip(keys, values, strict=True):
                self.write(partition, key, value, schema_id, allow_duplicate_key)

    def write_record(self, partition: int, key: bytes, value: bytes | None, schema_id: int, timestamp_ms: int) -> None:
        """A record as stored (value compressed already), with its write timestamp; `value` None is a DELETE."""
        writer = self._writer_for(partition)
        if value is None:
            writer.delete(key, schema_id, partition=partition, timestamp_ms=timestamp_ms)
            return
        writer.put(key, value, schema_id, partition=partition, timestamp_ms=timestamp_ms)
        self._written(partition)

    def write_stored_run(
        self, partition: int, kafka_keys: list[bytes], bodies: list[bytes], stamps: Sequence[int] | np.ndarray
    ) -> None:
        """Many PUTs copied as a version topic holds them (`write_stored` of each), at once through
        `VersionTopicWriter.put_stored_run` unless one is to be chunked or the retry test's fault is set here."""
        writer = self._writer_for(partition)
        limit = writer.max_chunk_bytes + SCHEMA_ID.size
        if partition == self.spec.fail_partition or max(map(len, bodies), default=0) > limit:
            for kafka_key, body, stamp in zip(kafka_keys, bodies, stamps, strict=True):
                self.write_stored(partition, kafka_key, body, stamp)
            return
        for start in range(0, len(kafka_keys), STORED_RUN_RECORDS):  # bounded copies of a partition's records
            end = start + STORED_RUN_RECORDS
            writer.put_stored_run(partition, kafka_keys[start:end], bodies[start:end], stamps[start:end])
        self.counts[partition] += len(kafka_keys)

    def start_of_push(self, partition: int, body: dict[str, Any]) -> None:
        """START_OF_PUSH again in a partition, inside its segment: a repush that copied part of a partition sorted
        and then found it not plain says that the rest comes unsorted (`repush_tasks._amend_partition`)."""
        self._writer_for(partition).control(partition, ControlMessageType.START_OF_PUSH, body)

    def write_stored(self, partition: int, kafka_key: bytes, body: bytes, timestamp_ms: int) -> None:
        """A PUT copied as a version topic holds it (`VersionTopicWriter.put_stored`), with its write timestamp."""
        self._writer_for(partition).put_stored(kafka_key, body, partition, timestamp_ms)
        self._written(partition)

    def _written(self, partition: int) -> None:
        self.counts[partition] += 1
        spec = self.spec
        if partition != spec.fail_partition or self.counts[partition] != spec.fail_after:
            return
        if spec.stall_file:  # the first task to get here, of whichever attempt of whichever stage
            self._writer_for(partition).flush()
            stall(spec.stall_file)
        elif self.first_attempt:
            self._writer_for(partition).flush()  # part of the partition is in Kafka when the task dies
            raise RuntimeError(f"injected failure in partition {partition} after {self.counts[partition]} records")

    def finish(self) -> None:
        if self.writer is not None and self.partition is not None:
            self.writer.end_segment(self.partition)
            self.writer.flush()
            self.writer = None

    def counts_batch(self) -> Any:
        """The per-partition counts, as the one Arrow batch a writing task yields."""
        import pyarrow as pa

        return pa.RecordBatch.from_arrays(
            [pa.array(list(self.counts), pa.int32()), pa.array(list(self.counts.values()), pa.int64())],
            names=["partition", "records"],
        )


STALL_SECONDS = 120.0


def stall(path: str) -> None:
    """Fault injection for the tests that kill an executor mid-task: unless the file `path` exists, create it
    (saying which process stalls and where its module was imported from: on a cluster, the job's py-files) and
    wait to be killed; fail if that does not happen within STALL_SECONDS."""
    import json
    import os
    import time

    partial = f"{path}.partial-{os.getpid()}"
    with open(partial, "w") as file:
        json.dump({"pid": os.getpid(), "module": __file__}, file)
    try:
        os.link(partial, path)  # exclusive: one task stalls, and the file is whole when it appears
    except FileExistsError:
        return
    finally:
        os.unlink(partial)
    time.sleep(STALL_SECONDS)
    raise RuntimeError(f"the task stalled by {path} was not killed within {STALL_SECONDS:.0f}s")


def task_writer(spec: WriterSpec) -> PartitionWriter:
    """The writer of this Spark task (a retry is not its first attempt: fault injection spares it)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return PartitionWriter(spec, first_attempt=context is None or context.attemptNumber() == 0)


def write_batches(batches: Any, spec: PushTaskSpec) -> Any:
    """mapInArrow on the executors: write sorted rows through the protocol writer; yield per-partition counts."""
    writer = task_writer(spec.writer)
    schema_id, allow_duplicate_key = spec.schema_id, spec.allow_duplicate_key
    for batch in batches:
        if batch.num_rows:
            writer.write_batch(batch, schema_id, allow_duplicate_key)
    writer.finish()
    yield writer.counts_batch()


WRITTEN_SCHEMA = "partition int, records long"


def write_sorted(
    rows: DataFrame, partitions: int, sort_columns: list[str], task: Any, schema: str = WRITTEN_SCHEMA
) -> list[Row]:
    """The writing end both jobs share: shuffle rows (a `partition` column: the Kafka partition) so every Kafka
    partition lands whole in one task, sort within it by `sort_columns` in the JVM (Spark compares binary as
    unsigned bytes, as RocksDB does), run `task` (a mapInArrow function writing through `PartitionWriter` and
    yielding rows of `schema`, the first two `partition` and `records`) on each; the rows the tasks yielded. Kafka
    partition p goes to Spark partition p (`spark.tasks.hash_partitioning.spread_values`): hashed as they are, several
    Kafka partitions would share a task while other tasks idle."""
    from pyspark.sql import functions as F

    spread = F.array(*[F.lit(value).cast("int") for value in spread_values(partitions)])
    by_partition = F.element_at(spread, F.col("partition") + 1)
    ordered = rows.repartition(partitions, by_partition).sortWithinPartitions("partition", *sort_columns)
    return ordered.mapInArrow(task, schema).collect()


def record_counts(written: list[Any], partitions: int) -> dict[str, int]:
    """The records written to each Kafka partition (END_OF_PUSH's counts), from `write_sorted`'s rows."""
    counts = {str(p): 0 for p in range(partitions)}
    for row in written:
        if row.partition >= 0:
            counts[str(row.partition)] += row.records
    return counts
