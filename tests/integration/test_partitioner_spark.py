"""The shared partitioner vector, passed by the Spark job's own executor code (the writer and the client pass it
in tests/unit/test_protocol.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.partitioners import LastBytePartitioner
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner import partition_for
from venice_core.spark.specs.task_specs import PushTaskSpec, WriterSpec
from venice_core.spark.tasks.push_tasks import serialize_batches

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
    from venice_core.spark.tasks.push_tasks import write_sorted

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


def _spec(key_schema: Any, value_schema: Any, partitions: int, single_value: bool) -> PushTaskSpec:
    return PushTaskSpec(
        writer=WriterSpec("job", 1, "", "topic_v1", partitions, CompressionStrategy.NO_OP),
        schema_id=3,
        key_schema=key_schema,
        value_schema=value_schema,
        key_field="k",
        value_field="v",
        single_value=single_value,
    )


def _python_rows(df: Any, spec: PushTaskSpec, columns: list[str]) -> list[tuple[int, bytes, bytes]]:
    rows = df.select("k", *columns).mapInArrow(
        lambda it: serialize_batches(it, spec), "partition int, key binary, value binary"
    )
    return sorted((r.partition, bytes(r.key), bytes(r.value)) for r in rows.collect())


def test_the_jvm_serialises_and_partitions_as_the_python_reference(spark: Any) -> None:
    """`avro_columns.jvm_serialized` (Spark's `to_avro` and the platform's Java partitioner) writes the very bytes
    and partitions of `serialize_batches` (fastavro and `partition_for`): the partitioner vector's keys, a record of
    every primitive it takes (unions with null both ways round, nulls in them, widened ints and floats), and a
    single value."""
    from venice_core.spark.jobs.avro_columns import jvm_serialized

    for key_schema, spark_type in (("string", "string"), ("int", "int"), ("long", "bigint")):
        cases = [c for c in VECTORS if c["key_schema"] == key_schema]
        for count in sorted({c["partition_count"] for c in cases}):
            subset = [c for c in cases if c["partition_count"] == count]
            spec = _spec(key_schema, "int", count, single_value=True)
            df = spark.createDataFrame([(c["key"], 0) for c in subset], f"k {spark_type}, v int")
            rows = jvm_serialized(df, spec, ["v"]).collect()
            assert {bytes(r.key).hex(): r.partition for r in rows} == {
                c["serialized_hex"]: c["partition"] for c in subset
            }
    record = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "s", "type": "string"},
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "d", "type": "double"},
            {"name": "f", "type": "float"},
            {"name": "b", "type": "boolean"},
            {"name": "y", "type": "bytes"},
            {"name": "ns", "type": ["null", "string"], "default": None},
            {"name": "nl", "type": ["long", "null"]},
        ],
    }
    data = [
        (f"key-{n}", f"né-{n}" * (n % 70), n - 50, n * 2**20 - 5, n / 7, n / 3, n % 2 == 0, bytes([n % 256]) * (n % 5),
         None if n % 3 else f"x{n}", None if n % 4 else -n)
        for n in range(300)
    ]  # fmt: skip
    schema = "k string, s string, i short, l int, d float, f float, b boolean, y binary, ns string, nl long"
    df = spark.createDataFrame(data, schema)
    columns = ["s", "i", "l", "d", "f", "b", "y", "ns", "nl"]
    spec = _spec("string", record, 7, single_value=False)
    jvm = sorted((r.partition, bytes(r.key), bytes(r.value)) for r in jvm_serialized(df, spec, columns).collect())
    assert jvm == _python_rows(df, spec, columns)
    single = spark.createDataFrame([(n, None if n % 5 == 0 else f"v{n}") for n in range(100)], "k long, v string")
    spec = _spec("long", ["null", "string"], 5, single_value=True)
    jvm = sorted((r.partition, bytes(r.key), bytes(r.value)) for r in jvm_serialized(single, spec, ["v"]).collect())
    assert jvm == _python_rows(single, spec, ["v"])


def test_schemas_spark_cannot_write_exactly_go_to_python_and_a_null_is_refused_by_name(spark: Any) -> None:
    from venice_core.spark.jobs.avro_columns import jvm_serialized
    from venice_core.spark.jobs.push import failure_reason

    nested = {"type": "record", "name": "N", "fields": [{"name": "a", "type": {"type": "array", "items": "int"}}]}
    df = spark.createDataFrame([("k", [1])], "k string, a array<int>")
    assert jvm_serialized(df, _spec("string", nested, 4, False), ["a"]) is None
    fields = [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}]
    defaulted = {"type": "record", "name": "D", "fields": fields}
    df = spark.createDataFrame([("k", 1)], "k string, a int")
    assert jvm_serialized(df, _spec("string", defaulted, 4, False), ["a"]) is None
    narrowing = {"type": "record", "name": "L", "fields": [{"name": "a", "type": "int"}]}
    df = spark.createDataFrame([("k", 1)], "k string, a long")
    assert jvm_serialized(df, _spec("string", narrowing, 4, False), ["a"]) is None

    df = spark.createDataFrame([("good", 1), ("bad", None)], "k string, a int")
    refused = jvm_serialized(df, _spec("string", narrowing, 4, False), ["a"])
    with pytest.raises(Exception) as caught:
        refused.collect()
    assert (
        failure_reason(caught.value) == "value of key 'bad' does not match value schema 3: field 'a' is null, not int"
    )


def test_a_version_on_another_partitioner_is_partitioned_by_it_in_python_on_the_executors(spark: Any) -> None:
    """The JVM's `venice_partition` is MD5's: a version pinned to another partitioner skips it, and the executors
    partition with the version's own (here a class of the tests', unpickled on them by its name)."""
    from venice_core.spark.jobs.avro_columns import jvm_serialized

    spec = _spec("string", "int", 5, single_value=True)
    spec = replace(spec, writer=replace(spec.writer, partitioner=LastBytePartitioner({}, "string")))
    df = spark.createDataFrame([(f"key-{n}", n) for n in range(40)], "k string, v int")
    assert jvm_serialized(df, spec, ["v"]) is None
    rows = _python_rows(df, spec, ["v"])
    assert [partition for partition, _, _ in rows] == [key[-1] % 5 for _, key, _ in rows]
    assert any(partition != partition_for(key, 5) for partition, key, _ in rows)  # not MD5's partitions
