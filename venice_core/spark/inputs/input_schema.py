"""Match a Spark input schema (from Spark, or read locally by `spark.inputs.input_files`) against a store's Avro value
schemas; derive and register a new one when allowed; `venice push`'s checks of its input before anything starts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from venice_core.config import ClusterConfig
from venice_core.controller import stores as store_ops
from venice_core.controller.store_description import StoreDescription
from venice_core.errors import IncompatibleSchema, PushJobError, SchemaError
from venice_core.meta import MetadataStore
from venice_core.spark.inputs.input_files import check_sampleable, read_input_schema

T = TypeVar("T")

INTEGRAL = {"ByteType", "ShortType", "IntegerType", "LongType"}
# Avro primitive -> Spark types whose values serialise into it.
ACCEPTS = {
    "int": INTEGRAL,
    "long": INTEGRAL,
    "float": INTEGRAL | {"FloatType", "DoubleType"},
    "double": INTEGRAL | {"FloatType", "DoubleType"},
    "string": {"StringType"},
    "boolean": {"BooleanType"},
    "bytes": {"BinaryType"},
    "null": {"NullType"},
}
SPARK_TO_AVRO = {
    "ByteType": "int",
    "ShortType": "int",
    "IntegerType": "int",
    "LongType": "long",
    "FloatType": "float",
    "DoubleType": "double",
    "StringType": "string",
    "BooleanType": "boolean",
    "BinaryType": "bytes",
}


def _type_name(avro: Any) -> str:
    if isinstance(avro, str):
        return avro
    if isinstance(avro, list):
        return "union"
    return avro["type"] if isinstance(avro["type"], str) else _type_name(avro["type"])


def mismatch(avro: Any, spark_type: Any, path: str) -> str | None:
    """Why values of `spark_type` cannot be written with `avro`, or None."""
    spark_name = type(spark_type).__name__
    if spark_name == "NullType":
        return None  # an all-null JSON column: decided per value at serialisation
    if isinstance(avro, list):
        reasons = [mismatch(branch, spark_type, path) for branch in avro if branch != "null"]
        return None if any(r is None for r in reasons) else (reasons[0] if reasons else f"{path} must be null")
    kind = _type_name(avro)
    if kind == "record":
        if spark_name != "StructType":
            return f"field '{path}' is {spark_name} in the input but a record in the schema"
        return record_mismatch(avro, spark_type, path + "." if path else "")
    if kind == "array":
        if spark_name != "ArrayType":
            return f"field '{path}' is {spark_name} in the input but an array in the schema"
        return mismatch(avro["items"], spark_type.elementType, path + "[]")
    if kind == "map":
        if spark_name != "MapType":
            return f"field '{path}' is {spark_name} in the input but a map in the schema"
        return mismatch(avro["values"], spark_type.valueType, path + "{}")
    if kind == "enum":
        return None if spark_name == "StringType" else f"field '{path}' is {spark_name}, the schema wants an enum"
    if kind == "fixed":
        return None if spark_name == "BinaryType" else f"field '{path}' is {spark_name}, the schema wants fixed"
    if spark_name not in ACCEPTS.get(kind, set()):
        return f"field '{path}' is {spark_name} in the input but {kind} in the schema"
    return None


def record_mismatch(avro: dict[str, Any], struct: Any, prefix: str = "") -> str | None:
    input_fields = {f.name: f.dataType for f in struct.fields}
    schema_fields = {f["name"]: f for f in avro["fields"]}
    extra = [name for name in input_fields if name not in schema_fields]
    if extra:
        return f"input field '{prefix}{extra[0]}' is not in the schema"
    for name, field in schema_fields.items():
        if name not in input_fields:
            if "default" not in field:
                return f"the schema's field '{prefix}{name}' (no default) is missing from the input"
            continue
        reason = mismatch(field["type"], input_fields[name], prefix + name)
        if reason:
            return reason
    return None


def avro_type_for(spark_type: Any, name: str) -> Any:
    spark_name = type(spark_type).__name__
    if spark_name in SPARK_TO_AVRO:
        return SPARK_TO_AVRO[spark_name]
    if spark_name == "StructType":
        return {
            "type": "record",
            "name": name,
            "fields": [
                {"name": f.name, "type": ["null", avro_type_for(f.dataType, f"{name}_{f.name}")], "default": None}
                for f in spark_type.fields
            ],
        }
    if spark_name == "ArrayType":
        return {"type": "array", "items": avro_type_for(spark_type.elementType, name + "_item")}
    if spark_name == "MapType":
        return {"type": "map", "values": avro_type_for(spark_type.valueType, name + "_value")}
    raise SchemaError(f"input type {spark_name} has no Avro equivalent")


def input_value(struct: Any, key_field: str, value_field: str) -> tuple[list[str], Any, bool]:
    """Which of the input's fields form the value: `value_field` alone when the input has it, else every field
    but the key (as a record). Returns those columns, their Spark struct, and whether the value is the one field."""
    from pyspark.sql.types import StructType  # pyspark costs half a second to import: only where it is needed

    columns = [f.name for f in struct.fields]
    if key_field not in columns:
        raise PushJobError(f"input has no key field '{key_field}' (fields: {', '.join(columns)})")
    single_value = value_field in columns
    value_columns = [value_field] if single_value else [c for c in columns if c != key_field]
    if not value_columns:
        raise PushJobError(f"input has no value field '{value_field}' and no other fields to form the value")
    return value_columns, StructType([struct[c] for c in value_columns]), single_value


@dataclass(frozen=True)
class ValueSchemaChoice:
    """The value schema an input is written with: a registered one (its id), or one derived from the input that
    the store will register (id None)."""

    schema_id: int | None
    schema: Any
    changed: tuple[str, ...] = ()  # fields of the latest schema whose type a derived schema changes


def _registrable(info: StoreDescription, choice: ValueSchemaChoice, register: Callable[[str], T]) -> T:
    """`register` (check or add) the derived schema; an incompatible one is refused naming the fields it changes."""
    try:
        return register(json.dumps(choice.schema))
    except IncompatibleSchema as exc:
        changed = (
            f" (the input changes the type of {', '.join(repr(f) for f in choice.changed)})" if choice.changed else ""
        )
        raise IncompatibleSchema(
            f"the input needs a new value schema for '{info.name}', which cannot be registered{changed}: {exc}"
        ) from None


def choose_value_schema(
    info: StoreDescription, value_struct: Any, single_value: bool, value_field: str
) -> ValueSchemaChoice:
    """The newest registered value schema the input fits; a new one derived from the input when the store
    auto-registers (the caller registers it); otherwise a SchemaError saying why no schema fits."""
    target = value_struct.fields[0].dataType if single_value else value_struct
    reasons = []
    for entry in reversed(info.value_schemas):
        reason = mismatch(entry.schema, target, value_struct.fields[0].name if single_value else "")
        if reason is None:
            return ValueSchemaChoice(entry.id, entry.schema)
        reasons.append(f"value schema {entry.id}: {reason}")
    if not info.settings.auto_register_schemas or single_value:
        what = (
            "input" if single_value else f"input has no value field '{value_field}', and the record of its other fields"
        )
        raise SchemaError(
            f"{what} does not match any value schema of '{info.name}' ({'; '.join(reasons)}); "
            "register a compatible schema or enable auto-registration"
        )
    latest = info.value_schemas[-1].schema
    if _type_name(latest) != "record":
        raise SchemaError(f"cannot derive a value schema from the input: '{info.name}' values are not records")
    known = {f["name"]: f for f in latest["fields"]}
    fits = {
        f.name
        for f in value_struct.fields
        if f.name in known and mismatch(known[f.name]["type"], f.dataType, f.name) is None
    }
    fields = [
        known[f.name]
        if f.name in fits
        else {"name": f.name, "type": ["null", avro_type_for(f.dataType, f.name)], "default": None}
        for f in value_struct.fields
    ]
    changed = tuple(f.name for f in value_struct.fields if f.name in known and f.name not in fits)
    return ValueSchemaChoice(None, {**latest, "fields": fields}, changed)


def match_value_schema(
    meta: MetadataStore,
    config: ClusterConfig,
    info: StoreDescription,
    value_struct: Any,
    single_value: bool,
    value_field: str,
    push_job_id: str,
) -> tuple[int, Any]:
    """The id and schema the input is written with. A schema derived from the input is registered here, through
    the schema-registration hooks (`stores.add_value_schema`): by the rollout's `schema_registration` step for
    input it can read, else by the push job. A hook's ABORT is a `SchemaRefused`, and nothing is registered."""
    choice = choose_value_schema(info, value_struct, single_value, value_field)
    if choice.schema_id is not None:
        return choice.schema_id, choice.schema
    schema_id = _registrable(
        info, choice, lambda text: store_ops.add_value_schema(meta, config, info.name, text, push_job_id)
    )
    return schema_id, choice.schema


def check_push_input(meta: MetadataStore, store: str, input_path: str, key_field: str, value_field: str) -> None:
    """`venice push`'s checks before anything starts (no version, no DAG run, no JVM): the store exists; a local
    input exists, is readable and has the key and value fields; it fits a value schema of the store, or one
    derived from it could be registered. Input only the job can read (a URL) is left to the job, but for a
    ZSTD_WITH_DICT store, which trains its dictionary from the input before the job (refused here)."""
    info = store_ops.describe_store(meta, store)
    struct = read_input_schema(input_path)
    if info.settings.compression.needs_dictionary:
        check_sampleable(input_path, struct)
    if struct is None:
        return
    _, value_struct, single_value = input_value(struct, key_field, value_field)
    choice = choose_value_schema(info, value_struct, single_value, value_field)
    if choice.schema_id is None:
        _registrable(info, choice, lambda text: store_ops.check_value_schema(meta, store, text))
