"""The shared partitioner vector, passed by the Spark job's own executor code (the writer and the client pass it
in tests/unit/test_protocol.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from venice_core.protocol.compression import CompressionStrategy
from venice_core.spark.push_tasks import serialize_batches
from venice_core.spark.task_specs import PushTaskSpec, WriterSpec

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "partitioner.json").read_text())["cases"]


def test_spark_job_partitions_like_the_vector(spark: Any) -> None:
    for key_schema, spark_type in (("string", "string"), ("int", "int"), ("long", "bigint")):
        cases = [c for c in VECTORS if c["key_schema"] == key_schema]
        for count in sorted({c["partition_count"] for c in cases}):
            subset = [c for c in cases if c["partition_count"] == count]
            spec = PushTaskSpec(
                writer=WriterSpec("job", 1, "", "topic_v1", count, CompressionStrategy.NO_OP),
                schema_id=1,
                key_schema=key_schema,
                value_schema="int",
                key_field="k",
                value_field="v",
                single_value=True,
            )
            df = spark.createDataFrame([(c["key"], 0) for c in subset], f"k {spark_type}, v int")
            rows = df.mapInArrow(
                lambda it, spec=spec: serialize_batches(it, spec), "partition int, key binary, value binary"
            ).collect()
            got = {bytes(r.key).hex(): r.partition for r in rows}
            assert got == {c["serialized_hex"]: c["partition"] for c in subset}


def test_each_kafka_partition_is_written_by_a_task_of_its_own(spark: Any) -> None:
    """`write_sorted` gives Kafka partition p to Spark partition p: no task writes two Kafka partitions."""
    from venice_core.spark.push_tasks import write_sorted

    def task(batches: Any) -> Any:
        import pyarrow as pa
        from pyspark import TaskContext

        seen: set[int] = set()
        for batch in batches:
            seen.update(batch.column("partition").to_pylist())
        task_id = TaskContext.get().partitionId()
        yield pa.RecordBatch.from_pylist(
            [{"partition": p, "records": 0, "task": task_id} for p in sorted(seen)],
            schema=pa.schema([("partition", pa.int32()), ("records", pa.int64()), ("task", pa.int32())]),
        )

    partitions = 4
    rows = spark.createDataFrame(
        [(i % partitions, bytes([i % 256]), b"v") for i in range(400)], "partition int, key binary, value binary"
    )
    written = write_sorted(rows, partitions, ["key"], task, "partition int, records long, task int")
    assert sorted((r.partition, r.task) for r in written) == [(p, p) for p in range(partitions)]
