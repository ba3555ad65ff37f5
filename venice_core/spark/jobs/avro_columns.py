"""The push job's keys, values and Kafka partitions computed in the JVM: Spark's `to_avro` (the `spark-avro` module)
and the platform's partitioner as a Java function (`venice_partition`; both jars from `extra_jars`), with no Python
worker before the shuffle. Measured on 1M records (bench/push_throughput), the stage before the shuffle fell from
4.7 to 1.8 s; the partitioner as SQL's own functions (md5 as hex, conv, casts) cost 8 CPU-seconds more than Java's.

Only for schemas whose every value Spark writes exactly as fastavro does: primitives, records of primitives (in
the schema's field order, every field in the input) and unions of null and one primitive, from input columns of
the matching Spark type (or a widening of it). Anything else (nested records, arrays, maps, enums, a field left to
its default, a long column into an int) goes through the Python serialiser (`push_tasks.serialize_batches`), whose
checks are the reference; so does every key of a version whose partitioner is not the default (the Java function
is MD5's). A null where the schema has no null is refused by `raise_error`, naming the key, the
schema id and the field, as a PushJobError (`spark.jobs.push.failure_reason` finds it after the marker). (fastavro
writes a null boolean as false; this path refuses it.)
"""

from __future__ import annotations

import json
from typing import Any

from venice_core.protocol import serde
from venice_core.protocol.partitioner import DefaultVenicePartitioner
from venice_core.protocol.serde import AvroSchemaJson
from venice_core.spark.specs.task_specs import PushTaskSpec
from venice_core.spark.submit.extra_jars import register_functions

# Avro primitive -> the Spark types written into it exactly (after a cast to the first, Spark's own type for it).
EXACT = {
    "int": ("IntegerType", "ShortType", "ByteType"),
    "long": ("LongType", "IntegerType", "ShortType", "ByteType"),
    "double": ("DoubleType", "FloatType", "IntegerType", "ShortType", "ByteType"),
    "float": ("FloatType",),
    "string": ("StringType",),
    "boolean": ("BooleanType",),
    "bytes": ("BinaryType",),
}
CAST = {
    "int": "int",
    "long": "bigint",
    "double": "double",
    "float": "float",
    "string": "string",
    "boolean": "boolean",
    "bytes": "binary",
}
REFUSED = "PushJobError: "  # what `spark.jobs.push._refusal` looks for in an executor's error


def _primitive(avro: AvroSchemaJson) -> tuple[str, bool] | None:
    """(the primitive, whether null is allowed) of a primitive or a union of null and one primitive, else None."""
    if isinstance(avro, dict) and set(avro) == {"type"}:
        avro = avro["type"]
    if isinstance(avro, str):
        return (avro, False) if avro in EXACT else None
    if isinstance(avro, list) and len(avro) == 2 and "null" in avro:
        other = next(branch for branch in avro if branch != "null")
        found = _primitive(other)
        return None if found is None or found[1] else (found[0], True)
    return None


def _writable(avro: AvroSchemaJson, spark_type: Any) -> tuple[str, bool] | None:
    found = _primitive(avro)
    if found is None or type(spark_type).__name__ not in EXACT[found[0]]:
        return None
    return found


def _fields(spec: PushTaskSpec, input_types: dict[str, Any]) -> list[tuple[str, str, bool]] | None:
    """The value's (column, Avro primitive, nullable) in the order Avro writes them, or None if Spark cannot write
    the value exactly."""
    schema = spec.value_schema
    if spec.single_value:
        found = _writable(schema, input_types[spec.value_field])
        return None if found is None else [(spec.value_field, *found)]
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    if set(input_types) - {spec.key_field} != {field["name"] for field in schema["fields"]}:
        return None  # a field left to its default
    fields = []
    for field in schema["fields"]:
        found = _writable(field["type"], input_types[field["name"]])
        if found is None:
            return None
        fields.append((field["name"], *found))
    return fields


def jvm_serialized(df: Any, spec: PushTaskSpec, value_columns: list[str]) -> Any | None:
    """`df` as (partition int, key binary, value binary), computed in the JVM, or None if the schemas or the
    version's partitioner need the Python serialiser."""
    if type(spec.writer.partitioner) is not DefaultVenicePartitioner:
        return None
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    types = {field.name: field.dataType for field in df.select(spec.key_field, *value_columns).schema.fields}
    key = _writable(spec.key_schema, types[spec.key_field])
    fields = _fields(spec, types)
    if key is None or key[1] or fields is None:
        return None
    register_functions(df.sparkSession)
    key_column = F.col(spec.key_field)
    shown_key = F.concat(F.lit("'"), key_column.cast("string"), F.lit("'")) if key[0] == "string" else key_column
    checks = [(key_column.isNull(), F.lit(f"key None does not match the key schema: {spec.key_schema!r} is no null"))]
    for name, primitive, nullable in fields:
        if not nullable:
            message = F.concat(
                F.lit("value of key "),
                shown_key.cast("string"),
                F.lit(f" does not match value schema {spec.schema_id}: field {name!r} is null, not {primitive}"),
            )
            checks.append((F.col(name).isNull(), message))
    refusal = F.lit(None)
    for condition, message in reversed(checks):
        refusal = F.when(condition, F.raise_error(F.concat(F.lit(REFUSED), message))).otherwise(refusal)
    cast = [F.col(name).cast(CAST[primitive]).alias(name) for name, primitive, _ in fields]
    value = cast[0] if spec.single_value else F.struct(*cast)
    key_bytes = to_avro(key_column.cast(CAST[key[0]]), json.dumps(spec.key_schema))
    value_bytes = to_avro(value, json.dumps(spec.value_schema))
    if spec.single_value and fields[0][2]:  # to_avro writes a null value as SQL's null, not as the union's null
        null = serde.serialize(serde.parse(spec.value_schema), None)
        value_bytes = F.coalesce(value_bytes, F.lit(null))
    serialized = df.select(
        F.coalesce(refusal, key_bytes).alias("key"),  # the refusal, if any, raised before the key is written
        value_bytes.alias("value"),
    )
    return serialized.select(partition_column(F.col("key"), spec.writer.partitions).alias("partition"), "key", "value")


def partition_column(key: Any, partitions: int) -> Any:
    """`protocol.partitioner.partition_for` as SQL: the platform's `venice_partition` (`extra_jars.FUNCTIONS`,
    registered on the session by `extra_jars.register_functions`)."""
    from pyspark.sql import functions as F

    return F.call_function("venice_partition", key, F.lit(partitions))
