"""Match a Spark input schema against a store's Avro value schemas; derive and register a new one when allowed."""

from __future__ import annotations

import json
from typing import Any

from venice_core.controller import stores as store_ops
from venice_core.errors import SchemaError
from venice_core.meta import MetadataStore

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


def match_value_schema(
    meta: MetadataStore, info: dict[str, Any], value_struct: Any, single_value: bool
) -> tuple[int, Any]:
    """The id and schema of the newest registered value schema the input fits; a new one is derived from the
    input and registered (it must be compatible) when the store auto-registers; otherwise a SchemaError."""
    target = value_struct.fields[0].dataType if single_value else value_struct
    reasons = []
    for entry in reversed(info["value_schemas"]):
        reason = mismatch(entry["schema"], target, value_struct.fields[0].name if single_value else "")
        if reason is None:
            return entry["id"], entry["schema"]
        reasons.append(f"value schema {entry['id']}: {reason}")
    if not info["auto_register_schemas"] or single_value:
        raise SchemaError(
            f"input does not match any value schema of '{info['name']}' ({'; '.join(reasons)}); "
            "register a compatible schema or enable auto-registration"
        )
    latest = info["value_schemas"][-1]["schema"]
    if _type_name(latest) != "record":
        raise SchemaError(f"cannot derive a value schema from the input: '{info['name']}' values are not records")
    known = {f["name"]: f for f in latest["fields"]}
    fields = [
        known[f.name]
        if f.name in known and mismatch(known[f.name]["type"], f.dataType, f.name) is None
        else {"name": f.name, "type": ["null", avro_type_for(f.dataType, f.name)], "default": None}
        for f in value_struct.fields
    ]
    derived = {**latest, "fields": fields}
    schema_id = store_ops.add_value_schema(meta, info["name"], json.dumps(derived))
    return schema_id, derived
