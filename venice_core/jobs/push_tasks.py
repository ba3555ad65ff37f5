"""What the push job runs on Spark's executors: serialise input rows, and write sorted partitions through the
protocol writer. Kept apart from `jobs.push` so that each Python worker imports only this and what it needs (not
the metadata store and SQLAlchemy: 1.5 s per worker)."""

from __future__ import annotations

from typing import Any

from venice_core.client import serde
from venice_core.errors import VeniceError
from venice_core.protocol.compression import CompressionStrategy, compressor
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub.writer import VersionTopicWriter


class PushJobError(VeniceError):
    """The input or the store refuses the push (raised on the driver or, inside a Spark error, on an executor)."""


def serialize_batches(batches: Any, spec: dict[str, Any]) -> Any:
    """mapInArrow on the executors: input rows -> (kafka partition, key bytes, value bytes)."""
    import pyarrow as pa

    key_schema, value_schema = serde.parse(spec["key_schema"]), serde.parse(spec["value_schema"])
    key_field, value_field, partitions = spec["key_field"], spec["value_field"], spec["partitions"]
    for batch in batches:
        out_partitions, out_keys, out_values = [], [], []
        for row in batch.to_pylist():
            key = row.pop(key_field)
            value = row[value_field] if spec["single_value"] else row
            try:
                key_bytes = serde.serialize(key_schema, key)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PushJobError(f"key {key!r} does not match the key schema: {exc}") from None
            try:
                value_bytes = serde.serialize(value_schema, value)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PushJobError(
                    f"value of key {key!r} does not match value schema {spec['schema_id']}: {exc}"
                ) from None
            out_partitions.append(partition_for(key_bytes, partitions))
            out_keys.append(key_bytes)
            out_values.append(value_bytes)
        yield pa.RecordBatch.from_arrays(
            [pa.array(out_partitions, pa.int32()), pa.array(out_keys, pa.binary()), pa.array(out_values, pa.binary())],
            names=["partition", "key", "value"],
        )


class PartitionWriter:
    """Writes the Kafka partitions one Spark task holds (each whole, sorted by key bytes then value bytes)."""

    def __init__(self, spec: dict[str, Any], first_attempt: bool) -> None:
        self.spec = spec
        self.first_attempt = first_attempt
        self.compress = compressor(CompressionStrategy[spec["compression"]])
        self.counts: dict[int, int] = {}
        self.partition: int | None = None
        self.writer: VersionTopicWriter | None = None
        self.previous: tuple[bytes, bytes] | None = None

    def _switch(self, partition: int) -> None:
        self.finish()
        spec = self.spec
        # A GUID per Kafka partition derived from the push job id: a retried task writes as the same producer.
        guid = deterministic_guid(spec["push_job_id"], spec["version"], partition)
        self.writer = VersionTopicWriter(spec["bootstrap"], spec["topic"], spec["partitions"], guid)
        self.writer.start_segment(partition)
        self.partition, self.previous = partition, None
        self.counts[partition] = 0

    def write(self, partition: int, key: bytes, value: bytes) -> None:
        if partition != self.partition:
            self._switch(partition)
        if self.previous is not None and self.previous[0] == key:
            if self.previous[1] == value or self.spec["allow_duplicate_key"]:
                return
            raise PushJobError(
                f"duplicate key with different values in the input (key bytes {key[:32].hex()}); "
                "set allow.duplicate.key=true to keep one of them"
            )
        self.writer.put(key, self.compress(value), self.spec["schema_id"], partition=partition)
        self.previous = (key, value)
        self.counts[partition] += 1
        injected = self.first_attempt and partition == self.spec["fail_partition"]
        if injected and self.counts[partition] == self.spec["fail_after"]:
            self.writer.flush()  # part of the partition is in Kafka when the task dies
            raise RuntimeError(f"injected failure in partition {partition} after {self.counts[partition]} records")

    def finish(self) -> None:
        if self.writer is not None:
            self.writer.end_segment(self.partition)
            self.writer.flush()
            self.writer = None


def write_batches(batches: Any, spec: dict[str, Any]) -> Any:
    """mapInArrow on the executors: write sorted rows through the protocol writer; yield per-partition counts."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    writer = PartitionWriter(spec, first_attempt=context is None or context.attemptNumber() == 0)
    for batch in batches:
        columns = [batch.column(i).to_pylist() for i in range(3)]
        for partition, key, value in zip(*columns, strict=True):
            writer.write(partition, key, value)
    writer.finish()
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(writer.counts), pa.int32()), pa.array(list(writer.counts.values()), pa.int64())],
        names=["partition", "records"],
    )
